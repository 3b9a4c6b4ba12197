package admissionload

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestClassify(t *testing.T) {
	deny := Operation{Name: "deny", Denial: PVSafeDenial}
	allow := Operation{Name: "allow"}
	denied := errors.New(`admission webhook "pvsafe.gatehouse.dev" denied the request: PersistentVolumeClaim 'load-pvsafe/risky' would lose data permanently.`)
	for _, tc := range []struct {
		name string
		op   Operation
		err  error
		want Outcome
	}{
		{"allowed as expected", allow, nil, Allowed},
		{"denied as expected", deny, denied, Denied},
		{"a denial that did not come: a webhook failed open", deny, nil, Failed},
		{"an allow that was denied", allow, denied, Failed},
		{"denied for another reason", deny, errors.New(`admission webhook "pvsafe.gatehouse.dev" denied the request: something else`), Failed},
		{"the module's words in a call error", deny, errors.New(`Internal error occurred: failed calling webhook "pvsafe.gatehouse.dev": ... would lose data permanently`), Failed},
		{"failed calling webhook", allow, errors.New(`Internal error occurred: failed calling webhook "pvsafe.gatehouse.dev": failed to call webhook: Post "https://gatehouse.gatehouse-system.svc:443/validate-pvsafe?timeout=10s": dial tcp 10.96.0.12:443: connect: connection refused`), Failed},
		{"a conversion that failed", allow, errors.New(`conversion webhook for deckhouse.io/v1, Kind=NodeGroup failed: Post "https://...": EOF`), Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := classify(tc.op, tc.err)
			if got != tc.want {
				t.Fatalf("classify(%s, %v) = %s (%s), want %s", tc.op.Name, tc.err, got, msg, tc.want)
			}
			if got == Failed && msg == "" {
				t.Fatal("a failure without a message")
			}
		})
	}
}

func TestOperationsInterleaveModules(t *testing.T) {
	ops := Operations("pvsafe", "nodegroup", "placement", "configcheck")
	if len(ops) != 11 {
		t.Fatalf("%d operations", len(ops))
	}
	// Every module within the first four: each second of load reaches all.
	seen := map[string]bool{}
	for _, op := range ops[:4] {
		seen[op.Module] = true
	}
	if len(seen) != 4 {
		t.Fatalf("the first four operations reach %v", seen)
	}
	// Every module sends a request that only a working webhook denies.
	denies := map[string]bool{}
	for _, op := range ops {
		if op.Denial != "" {
			denies[op.Module] = true
		}
	}
	if len(denies) != 4 {
		t.Fatalf("modules with an expected denial: %v", denies)
	}
}

func TestReportEndedBetween(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	rep := newReport([]Result{
		{Module: "pvsafe", Start: at(0), End: at(1), Outcome: Allowed},
		{Module: "pvsafe", Start: at(1), End: at(3), Outcome: Failed, Message: "connection refused"},
		{Module: "nodegroup", Start: at(2), End: at(5), Outcome: Denied},
	}, at(0), at(6))
	if rep.Allowed != 1 || rep.Denied != 1 || rep.Failed != 1 || rep.Sent() != 3 {
		t.Fatalf("%+v", rep)
	}
	after := rep.EndedBetween(at(3), at(6))
	if after.Sent() != 2 || after.Failed != 1 || after.Denied != 1 {
		t.Fatalf("ended in [3s, 6s): %s", after)
	}
	if s := rep.String(); !strings.Contains(s, "connection refused") || !strings.Contains(s, "pvsafe: 1 allowed, 0 denied, 1 failed") {
		t.Fatalf("summary lacks the failure or the counts:\n%s", s)
	}
}

func TestParseWitness(t *testing.T) {
	raw := `# TYPE apiserver_admission_webhook_request_total counter
apiserver_admission_webhook_request_total{code="200",name="pvsafe.gatehouse.dev",operation="DELETE",rejected="false",type="validating"} 40
apiserver_admission_webhook_request_total{code="0",name="pvsafe.gatehouse.dev",operation="DELETE",rejected="true",type="validating"} 2
# TYPE apiserver_admission_webhook_fail_open_count counter
apiserver_admission_webhook_fail_open_count{name="placement-pod.gatehouse.dev",type="validating"} 3
# TYPE apiserver_admission_webhook_rejection_count counter
apiserver_admission_webhook_rejection_count{error_type="calling_webhook_error",name="pvsafe.gatehouse.dev",operation="DELETE",rejection_code="0",type="validating"} 2
apiserver_admission_webhook_rejection_count{error_type="no_error",name="pvsafe.gatehouse.dev",operation="DELETE",rejection_code="403",type="validating"} 20
# TYPE apiserver_conversion_webhook_request_total counter
apiserver_conversion_webhook_request_total{failure_type="",result="success"} 17
apiserver_conversion_webhook_request_total{failure_type="conversion_webhook_call_failure",result="failure"} 1
`
	w, err := parseWitness([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := Witness{Calls: 42, FailedOpen: 3, CallErrors: 2, Conversions: 18, ConversionFailures: 1}
	if w != want {
		t.Fatalf("got %+v, want %+v", w, want)
	}
	if w.Failures() != 6 {
		t.Fatalf("failures %v", w.Failures())
	}
	if d := w.Sub(Witness{Calls: 40, Conversions: 17}); d.Calls != 2 || d.Conversions != 1 {
		t.Fatalf("sub %+v", d)
	}
}

// TestModuleInFlightIsBounded: a module whose admissions are slow to answer
// never has more than MaxInFlightPerModule of them waiting; the load slows
// down instead of piling them up.
func TestModuleInFlightIsBounded(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	inFlight, most := 0, 0
	slow := func(ctx context.Context, _ client.Client) error {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil
	}
	fast := func(context.Context, client.Client) error { return nil }
	r := &Run{
		opts:    Options{Rate: 1000, MaxInFlight: 64, MaxInFlightPerModule: 3, Timeout: time.Minute},
		ops:     []Operation{{Name: "slow", Module: "slow", Do: slow}, {Name: "fast", Module: "fast", Do: fast}},
		done:    make(chan struct{}),
		started: time.Now(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go r.send(ctx)
	time.Sleep(100 * time.Millisecond) // a hundred sends due at 1000/s
	mu.Lock()
	got := most
	mu.Unlock()
	close(release)
	rep := r.Stop()
	if got != 3 {
		t.Fatalf("at most %d slow admissions waited at once, want the bound, 3", got)
	}
	if rep.Allowed == 0 || rep.Failed != 0 {
		t.Fatalf("the load after the slow ones were answered: %s", rep)
	}
}
