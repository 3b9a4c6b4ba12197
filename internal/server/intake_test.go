package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/gatehouse-dev/gatehouse/internal/certs"
	"github.com/gatehouse-dev/gatehouse/internal/module"
	"github.com/gatehouse-dev/gatehouse/internal/server"
)

// slowPost is the attacker with no identity: it connects from src (an
// address of the loopback network: Linux routes all of 127/8 to lo),
// announces a body of size bytes to path, sends prefix bytes of it at
// once, then one byte every every until the server answers, the body is
// sent or ctx ends. It returns the answer's status, or the error that
// stood in for an answer (a TLS error, a reset).
func slowPost(ctx context.Context, addr, src, path string, size, prefix int, every time.Duration) (int, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	answer := make(chan error, 1)
	var code int
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err == nil {
			code = resp.StatusCode
			_, err = io.Copy(io.Discard, resp.Body)
			if err != nil && code != 0 {
				// The answer arrived; the connection's end after it is
				// the server's to choose.
				err = nil
			}
		}
		answer <- err
	}()
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: gatehouse\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, size, bytes.Repeat([]byte(" "), prefix)); err != nil {
		return 0, err
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for sent := prefix; ; {
		select {
		case err := <-answer:
			return code, err
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
			if sent < size {
				if _, err := conn.Write([]byte(" ")); err == nil {
					sent++
				}
			}
		}
	}
}

// attack runs n slow posters per source address, each posting again once
// answered, until ctx ends; it returns the answers by status (0: no
// answer) once they have stopped, and started, closed once every poster
// has sent its first request.
type attack struct {
	mu      sync.Mutex
	answers map[int]int
	errs    []string
	wg      sync.WaitGroup
}

func startAttack(ctx context.Context, t testing.TB, addr, path string, sources []string, n, size, prefix int, every time.Duration) *attack {
	t.Helper()
	a := &attack{answers: map[int]int{}}
	for _, src := range sources {
		// Bind once before the attack: the source address must exist.
		ln, err := net.Listen("tcp", src+":0")
		if err != nil {
			t.Fatalf("the loopback address %s cannot be bound: %v", src, err)
		}
		ln.Close()
		for range n {
			a.wg.Go(func() {
				for ctx.Err() == nil {
					code, err := slowPost(ctx, addr, src, path, size, prefix, every)
					if ctx.Err() != nil {
						return
					}
					a.mu.Lock()
					a.answers[code]++
					if err != nil && len(a.errs) < 5 {
						a.errs = append(a.errs, err.Error())
					}
					a.mu.Unlock()
				}
			})
		}
	}
	return a
}

func (a *attack) wait() (map[int]int, []string) {
	a.wg.Wait()
	return a.answers, a.errs
}

// reviewsDuring posts reviews with post one after the other for d and
// returns their latencies and refusals.
func reviewsDuring(d time.Duration, post func(uid string) (int, string)) (latencies []time.Duration, refused []string) {
	for i, end := 0, time.Now().Add(d); time.Now().Before(end); i++ {
		began := time.Now()
		code, out := post(fmt.Sprintf("r%d", i))
		latencies = append(latencies, time.Since(began))
		if code != http.StatusOK {
			refused = append(refused, fmt.Sprintf("%d %s", code, out))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return latencies, refused
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestSlowBodiesDoNotShedOtherCallersReviews plays the finding of issue
// 35 straight to the port, as an attacker with no identity against a
// server without client certificates (make run, the chart's default): 40
// TLS connections announcing 256 KiB bodies and sending a byte every 100
// ms, posting again whenever answered, from one address and from four,
// while reviews from another address (the API server's) keep coming.
// Before, 32 such bodies took the whole in-flight budget for the read
// timeout and every review got 429 (a Pod admitted unjudged where the
// webhook is failurePolicy Ignore). Now each body is charged as it
// arrives, to its address's share, and closed with 408 once slower than
// MinBodyRate: no review is refused. Their latency against the idle one
// is BenchmarkReviewUnderSlowBodies's.
func TestSlowBodiesDoNotShedOtherCallersReviews(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sources []string
	}{
		{"one address", []string{"127.0.0.2"}},
		{"four addresses", []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, nil, func(s *server.Server) {
				s.Admission("test", validating("v.test", "/v", func(context.Context, admission.Request) admission.Response {
					return admission.Allowed("")
				}), module.Enforce)
			})
			post := func(uid string) (int, string) {
				code, out := h.post(t, "/v", review(uid, admissionv1.Create))
				return code, string(out)
			}
			idle, refused := reviewsDuring(300*time.Millisecond, post)
			if len(refused) > 0 {
				t.Fatalf("idle reviews refused: %v", refused)
			}
			ctx, stop := context.WithCancel(t.Context())
			a := startAttack(ctx, t, strings.TrimPrefix(h.url, "https://"), "/v", tc.sources, 40/len(tc.sources), 256<<10, 0, 100*time.Millisecond)
			time.Sleep(300 * time.Millisecond) // the attack's connections are open and announced
			// Longer than a slow body lasts now (bodyGrace): the attack
			// posts again through the run.
			busy, refused := reviewsDuring(2500*time.Millisecond, post)
			stop()
			answers, errs := a.wait()
			t.Logf("reviews: %d idle (median %s), %d under attack (median %s); the attack's answers by status %v %v",
				len(idle), median(idle), len(busy), median(busy), answers, errs)
			if len(refused) > 0 {
				t.Errorf("%d of %d reviews refused during the attack, the first: %s", len(refused), len(busy), refused[0])
			}
			if answers[http.StatusRequestTimeout] == 0 {
				t.Errorf("no slow body was closed with 408: %v", answers)
			}
		})
	}
}

// clientCA is a CA bundle for ClientAuth and a client certificate it
// signed, the API server's.
func clientCA(t *testing.T) (server.ClientCAs, *certs.ClientBundle) {
	t.Helper()
	apiServer, err := certs.SelfSignedClient("kube-apiserver-webhook-client", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, apiServer.CACert, 0o600); err != nil {
		t.Fatal(err)
	}
	cas, err := certs.NewClientCA(caFile, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	return cas, apiServer
}

// TestVerifiedCallersKeepTheirReserve: with client certificates, the
// strangers' way in is the conversion path, which kube-apiserver calls
// without one. Eight addresses holding 32 bodies of 256 KiB there, sent
// fast enough that no rate closes them, took the whole budget before;
// now they hold at most what the reserve leaves, and the API server's
// reviews, verified by its certificate, are all answered.
func TestVerifiedCallersKeepTheirReserve(t *testing.T) {
	cas, apiServer := clientCA(t)
	h := start(t, func(o *server.Options) {
		o.ClientAuth = &server.ClientAuthOptions{CAs: cas}
		o.MinBodyRate = 1 // no rate closes the strangers' bodies here: the reserve alone is tested
	}, func(s *server.Server) {
		s.Admission("test", validating("v.test", "/v", func(context.Context, admission.Request) admission.Response {
			return admission.Allowed("")
		}), module.Enforce)
		s.Conversion("test", module.Webhook{Name: "c.test", Path: "/convert", Type: module.Conversion, CRDs: []string{"x"},
			Convert: func(_ context.Context, req *apiextensionsv1.ConversionRequest) ([]runtime.RawExtension, error) {
				return req.Objects, nil
			}})
	})
	verified := clientWith(t, h, apiServer)
	post := func(uid string) (int, string) {
		return postWith(t, verified, h.url+"/v", review(uid, admissionv1.Create))
	}
	var sources []string
	for i := 2; i < 10; i++ {
		sources = append(sources, fmt.Sprintf("127.0.0.%d", i))
	}
	ctx, stop := context.WithCancel(t.Context())
	// 250 KiB of each 256 KiB body at once, then a byte every 100 ms.
	a := startAttack(ctx, t, strings.TrimPrefix(h.url, "https://"), "/convert", sources, 4, 256<<10, 250<<10, 100*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	busy, refused := reviewsDuring(1500*time.Millisecond, post)
	stop()
	answers, _ := a.wait()
	t.Logf("%d verified reviews during the attack (median %s); the attack's answers by status %v", len(busy), median(busy), answers)
	if len(refused) > 0 {
		t.Errorf("%d of %d verified reviews refused, the first: %s", len(refused), len(busy), refused[0])
	}
}

// TestSlowBodyIsAnsweredNotCut: a body slower than MinBodyRate gets 408,
// an HTTP answer the caller reads, and so does one still arriving at the
// read timeout. Before, a slow body was read until the read timeout, and
// its 400 was written after the write timeout, which ends at the same
// moment by default: the client got "tls: bad record MAC" (tls.Conn
// numbers the record it failed to write, then sends close_notify under the
// next number) or nothing.
func TestSlowBodyIsAnsweredNotCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(*server.Options)
	}{
		{"slower than the minimum rate", func(o *server.Options) { o.ReadTimeout = 3 * time.Second }},
		{"cut by the read timeout", func(o *server.Options) {
			o.MinBodyRate = 1
			o.ReadTimeout, o.WriteTimeout = 1500*time.Millisecond, 1500*time.Millisecond
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, tc.opts, func(s *server.Server) {
				s.Admission("test", validating("v.test", "/v", func(context.Context, admission.Request) admission.Response {
					return admission.Allowed("")
				}), module.Enforce)
			})
			var wg sync.WaitGroup
			results := make([]string, 8)
			for i := range results {
				wg.Go(func() {
					code, err := slowPost(t.Context(), strings.TrimPrefix(h.url, "https://"), "127.0.0.1", "/v", 4096, 10, 50*time.Millisecond)
					results[i] = fmt.Sprintf("%d %v", code, err)
				})
			}
			wg.Wait()
			for _, r := range results {
				if r != "408 <nil>" {
					t.Errorf("slow bodies answered %q, want 408 each", results)
					break
				}
			}
		})
	}
}

// TestRefusedBodyIsReadToItsEnd: a large review refused for room is
// answered 429 after its body is read (charged nothing: discarded), and
// the connection serves the caller's next review. Before, the server
// answered without reading the body and closed the connection over the
// unread bytes half a second later: a client still writing the body got a
// reset, which Go's client (kube-apiserver's) reports instead of the answer
// when the write error reaches it first (a loaded core), and the next
// review paid a new connection.
func TestRefusedBodyIsReadToItsEnd(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	h := start(t, func(o *server.Options) {
		o.MaxRequestBytes, o.MaxInFlightBytes = 1<<20, 1<<20
		o.InFlightWait = 200 * time.Millisecond
	}, func(s *server.Server) {
		// A handler that holds its body's room until released.
		s.Register("/held", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			entered <- struct{}{}
			<-release
		}))
		s.Admission("test", validating("v.test", "/v", func(context.Context, admission.Request) admission.Response {
			return admission.Allowed("")
		}), module.Enforce)
	})
	large := bytes.Repeat([]byte(" "), 900<<10)
	held := make(chan struct{})
	go func() {
		defer close(held)
		_, _ = h.post(t, "/held", large)
	}()
	<-entered
	defer func() { close(release); <-held }()

	conn, err := tls.Dial("tcp", strings.TrimPrefix(h.url, "https://"), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	roundTrip := func(path string, body []byte) (*http.Response, error) {
		written := make(chan error, 1)
		go func() {
			_, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: gatehouse\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
			written <- err
		}()
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, <-written
	}
	resp, err := roundTrip("/held", large)
	if err != nil {
		t.Fatalf("the refused review: %v", err)
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "" {
		t.Errorf("status %d, Retry-After %q; want 429 and none", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	resp, err = roundTrip("/v", review("next", admissionv1.Create))
	if err != nil {
		t.Fatalf("the next review on the connection: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the next review on the connection: status %d", resp.StatusCode)
	}
}

// BenchmarkReviewUnderSlowBodies measures reviews from one address while
// 40 slow bodies from another are posted again and again
// (TestSlowBodiesDoNotShedOtherCallersReviews's attack), against the same
// reviews idle in the same run: busy/idle is the ratio of their medians.
func BenchmarkReviewUnderSlowBodies(b *testing.B) {
	h := start(b, nil, func(s *server.Server) {
		s.Admission("test", validating("v.test", "/v", func(context.Context, admission.Request) admission.Response {
			return admission.Allowed("")
		}), module.Enforce)
	})
	post := func(uid string) (int, string) {
		code, out := h.post(b, "/v", review(uid, admissionv1.Create))
		return code, string(out)
	}
	var idle, busy []time.Duration
	refusals := 0
	for b.Loop() {
		i, refused := reviewsDuring(500*time.Millisecond, post)
		idle, refusals = append(idle, i...), refusals+len(refused)
		ctx, stop := context.WithCancel(b.Context())
		a := startAttack(ctx, b, strings.TrimPrefix(h.url, "https://"), "/v", []string{"127.0.0.2"}, 40, 256<<10, 0, 100*time.Millisecond)
		time.Sleep(300 * time.Millisecond)
		u, refused := reviewsDuring(1500*time.Millisecond, post)
		busy, refusals = append(busy, u...), refusals+len(refused)
		stop()
		a.wait()
	}
	b.ReportMetric(float64(median(idle).Microseconds()), "idle-µs")
	b.ReportMetric(float64(median(busy).Microseconds()), "busy-µs")
	b.ReportMetric(float64(median(busy))/float64(median(idle)), "busy/idle")
	b.ReportMetric(float64(refusals), "refused")
}
