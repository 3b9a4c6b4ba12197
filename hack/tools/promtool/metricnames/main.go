// Command metricnames prints the metric names that Prometheus rule files
// and Grafana dashboards query, one per line, sorted: each query parsed by
// Prometheus's own PromQL parser, as the promtool it is built beside. The
// metric-existence test (test/e2e) checks every name against what Gatehouse
// and kube-apiserver serve on /metrics, so that no alert or panel queries
// a metric nobody exports.
//
//	metricnames charts/gatehouse/files/alerts.yaml charts/gatehouse/files/dashboard.json
//
// A .json file is a Grafana dashboard: every "expr" of its panels and every
// query of its template variables (label_values(<selector>, <label>),
// query_result(<query>)), with Grafana's variables replaced by placeholders
// first. Any other file is a Prometheus rule file.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: metricnames FILE...")
		os.Exit(2)
	}
	names := map[string]bool{}
	for _, file := range os.Args[1:] {
		if err := collect(file, names); err != nil {
			fmt.Fprintln(os.Stderr, "metricnames:", err)
			os.Exit(1)
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	for _, n := range sorted {
		fmt.Println(n)
	}
}

var promql = parser.NewParser(parser.Options{})

func collect(file string, names map[string]bool) error {
	var queries []string
	if strings.HasSuffix(file, ".json") {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		var dashboard any
		if err := json.Unmarshal(data, &dashboard); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		queries = dashboardQueries(dashboard, false)
	} else {
		groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				queries = append(queries, r.Expr)
			}
		}
	}
	if len(queries) == 0 {
		return fmt.Errorf("%s: no queries", file)
	}
	for _, q := range queries {
		expr, err := promql.ParseExpr(q)
		if err != nil {
			return fmt.Errorf("%s: %q: %w", file, q, err)
		}
		var selErr error
		parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
			vs, ok := node.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName && m.Type != labels.MatchEqual {
					selErr = fmt.Errorf("%s: %q selects metric names by pattern: name each metric", file, q)
				} else if m.Name == labels.MetricName {
					name = m.Value
				}
			}
			if name != "" {
				names[name] = true
			}
			return nil
		})
		if selErr != nil {
			return selErr
		}
	}
	return nil
}

// dashboardQueries finds the PromQL of a dashboard: "expr" anywhere, and
// the "query" of template variables (under "templating").
func dashboardQueries(v any, inTemplating bool) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			switch s, isString := child.(string); {
			case k == "expr" && isString:
				out = append(out, grafanaToPromQL(s))
			case k == "query" && inTemplating && isString:
				if q, ok := variableQuery(s); ok {
					out = append(out, grafanaToPromQL(q))
				}
			default:
				out = append(out, dashboardQueries(child, inTemplating || k == "templating")...)
			}
		}
	case []any:
		for _, child := range v {
			out = append(out, dashboardQueries(child, inTemplating)...)
		}
	}
	return out
}

var (
	labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)
	queryResult = regexp.MustCompile(`^\s*query_result\((.*)\)\s*$`)
	// Grafana's interval variables stand where PromQL wants a duration;
	// any other variable stands in a label value or regular expression.
	intervalVariable = regexp.MustCompile(`\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}`)
	variable         = regexp.MustCompile(`\$\{[^}]+\}|\$[a-zA-Z_][a-zA-Z0-9_]*`)
)

// variableQuery is the PromQL inside a Prometheus template variable's
// query; label_values(<label>) and the like query no metric.
func variableQuery(q string) (string, bool) {
	if m := labelValues.FindStringSubmatch(q); m != nil {
		return m[1], true
	}
	if m := queryResult.FindStringSubmatch(q); m != nil {
		return m[1], true
	}
	return "", false
}

func grafanaToPromQL(q string) string {
	q = intervalVariable.ReplaceAllString(q, "5m")
	return variable.ReplaceAllString(q, "placeholder")
}
