//go:build tools

// Package tools pins promtool, which checks and unit-tests the alert rules
// the chart ships (charts/gatehouse/files/alerts.yaml) in make test-alerts.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
