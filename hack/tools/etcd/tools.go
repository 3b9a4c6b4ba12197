//go:build tools

// Package tools pins the etcd server the harness builds.
package tools

import _ "go.etcd.io/etcd/server/v3"
