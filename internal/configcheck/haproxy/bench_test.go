package haproxy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/configcheck/render"
)

// bigConfig has n backends, each with two servers, routed by a map.
func bigConfig(n int) render.Output {
	var cfg, hosts strings.Builder
	cfg.WriteString(`global
    default-path config
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend fe
    bind 127.0.0.1:8080
    use_backend %[req.hdr(host),lower,map(maps/hosts.map,be_0)]
`)
	for i := range n {
		fmt.Fprintf(&cfg, "backend be_%d\n    balance roundrobin\n    server s1 10.0.%d.%d:8080 check\n    server s2 10.1.%d.%d:8080 check\n",
			i, i/250, i%250+1, i/250, i%250+1)
		fmt.Fprintf(&hosts, "host%d.example.test be_%d\n", i, i)
	}
	return render.Output{HAProxyConfig: cfg.String(), Maps: map[string]string{"hosts.map": hosts.String()}}
}

// BenchmarkCheck compares a cache hit with a real haproxy -c run of a
// 1,000-backend configuration.
func BenchmarkCheck(b *testing.B) {
	c := realChecker(b)
	out := bigConfig(1000)
	ctx := context.Background()
	v, err := c.Check(ctx, out)
	if err != nil || !v.Valid {
		b.Fatalf("Check = %+v, %v", v, err)
	}
	b.Run("cache-hit", func(b *testing.B) {
		for b.Loop() {
			if v, err := c.Check(ctx, out); err != nil || !v.Cached {
				b.Fatalf("Check = %+v, %v", v, err)
			}
		}
	})
	b.Run("haproxy-run", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			// A different comment each time: a new checksum, a real run.
			o := out
			o.HAProxyConfig = fmt.Sprintf("%s# %d\n", out.HAProxyConfig, i)
			if v, err := c.Check(ctx, o); err != nil || !v.Valid || v.Cached {
				b.Fatalf("Check = %+v, %v", v, err)
			}
		}
	})
}
