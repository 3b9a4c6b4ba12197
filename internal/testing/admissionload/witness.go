package admissionload

import (
	"bytes"
	"context"
	"fmt"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Witness is what kube-apiserver itself counted of its webhook calls (its
// /metrics), summed over every webhook: the second witness beside the
// load's own classification, which cannot see an admission that should be
// allowed and was allowed because its webhook failed open.
type Witness struct {
	// Calls are admission webhook calls (apiserver_admission_webhook_request_total).
	Calls float64
	// FailedOpen are calls that failed and were admitted by failurePolicy
	// Ignore (apiserver_admission_webhook_fail_open_count).
	FailedOpen float64
	// CallErrors are rejections because the call failed, by failurePolicy
	// Fail (apiserver_admission_webhook_rejection_count with an error_type
	// other than no_error).
	CallErrors float64
	// Conversions and ConversionFailures are CRD conversion webhook calls
	// (apiserver_conversion_webhook_request_total), and those whose result
	// was not success.
	Conversions, ConversionFailures float64
}

// Sub is the difference w - before: what happened between two readings.
func (w Witness) Sub(before Witness) Witness {
	return Witness{
		Calls: w.Calls - before.Calls, FailedOpen: w.FailedOpen - before.FailedOpen, CallErrors: w.CallErrors - before.CallErrors,
		Conversions: w.Conversions - before.Conversions, ConversionFailures: w.ConversionFailures - before.ConversionFailures,
	}
}

// Failures are the calls that failed, whatever the failure policy made of them.
func (w Witness) Failures() float64 { return w.FailedOpen + w.CallErrors + w.ConversionFailures }

func (w Witness) String() string {
	return fmt.Sprintf("kube-apiserver counted %.0f admission webhook calls (%.0f failed open, %.0f rejected for a failed call) and %.0f conversion webhook calls (%.0f failed)",
		w.Calls, w.FailedOpen, w.CallErrors, w.Conversions, w.ConversionFailures)
}

// ReadWitness reads kube-apiserver's /metrics as the user of cfg (who must
// be allowed get on the /metrics path, as cluster-admin is).
func ReadWitness(ctx context.Context, cfg *rest.Config) (Witness, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Witness{}, err
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return Witness{}, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	return parseWitness(raw)
}

func parseWitness(raw []byte) (Witness, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return Witness{}, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	sum := func(name string, keep func(labels map[string]string) bool) float64 {
		f := families[name]
		if f == nil {
			return 0
		}
		var total float64
		for _, m := range f.GetMetric() {
			if keep != nil && !keep(labelMap(m)) {
				continue
			}
			total += m.GetCounter().GetValue()
		}
		return total
	}
	return Witness{
		Calls:      sum("apiserver_admission_webhook_request_total", nil),
		FailedOpen: sum("apiserver_admission_webhook_fail_open_count", nil),
		CallErrors: sum("apiserver_admission_webhook_rejection_count", func(l map[string]string) bool {
			return l["error_type"] != "no_error"
		}),
		Conversions: sum("apiserver_conversion_webhook_request_total", nil),
		ConversionFailures: sum("apiserver_conversion_webhook_request_total", func(l map[string]string) bool {
			return l["result"] != "success"
		}),
	}, nil
}

func labelMap(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
