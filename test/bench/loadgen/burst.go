package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/testing/devenv"
)

// burstRates are the offered rates of the burst, in requests per second:
// from well inside what one core serves to several times beyond it.
var burstRates = []float64{1000, 2000, 4000, 6000, 8000, 10000, 12000, 14000, 16000}

// burst is the mixed load without configcheck's full renderings (their
// own burst is measured through kube-apiserver, docs/benchmarks.md), offered
// at rising rates: every request a cache answers.
func burst(streams []stream) scenario {
	var cacheServed []stream
	moved := 0
	for _, st := range streams {
		if st.scenario.Name == "configcheck-ingress-new-host" {
			moved = st.perMille
			continue
		}
		cacheServed = append(cacheServed, st)
	}
	cacheServed[0].perMille += moved
	sc := mixed(0, cacheServed)
	sc.Name = "burst-cache-served"
	sc.Burst = burstRates
	return sc
}

func burstHeader(cfg loadConfig) string {
	return fmt.Sprintf("Burst: the mixed load without configcheck's renderings, %d connections, each offered rate for %s, floor then Gatehouse:\n\n"+
		"| offered (req/s) | floor achieved | floor p99 | gatehouse achieved | gatehouse p50 | gatehouse p99 | failed | gatehouse RSS (max) | goroutines (max) |\n"+
		"|---|---|---|---|---|---|---|---|---|", cfg.BurstConcurrency, cfg.BurstStep)
}

// runBurst offers each rate to the floor, then to Gatehouse, sampling
// Gatehouse's resident memory and goroutines while it runs. Failures are
// reported, not fatal: beyond capacity they are what is measured.
func runBurst(ctx context.Context, env *devenv.Env, cfg loadConfig, sc scenario, next func(int) request, floor, gatehouse target, metricsURL string) ([]string, error) {
	var rows []string
	followed := -1 // the last step Gatehouse kept up with
	served := make([]float64, len(sc.Burst))
	for i, rate := range sc.Burst {
		step := loadConfig{Requests: int(rate * cfg.BurstStep.Seconds()), Concurrency: cfg.BurstConcurrency, Rate: rate, MaxDuration: cfg.BurstStep + 15*time.Second}
		f, err := runLoad(ctx, floor.url, env.CACert, floor.pid, step, next, false)
		if err != nil {
			return nil, err
		}
		sampler := startSampler(gatehouse.pid, metricsURL)
		g, err := runLoad(ctx, gatehouse.url, env.CACert, gatehouse.pid, step, next, true)
		peak := sampler.stop()
		if err != nil {
			return nil, err
		}
		fmt.Printf("loadgen: burst %.0f/s: floor %.0f/s, gatehouse %.0f/s p99 %s, %d failed (%s), RSS %d MiB, %d goroutines\n",
			rate, f.throughput(), g.throughput(), round(g.percentile(0.99)), g.Failed, g.FirstError, peak.rss>>20, peak.goroutines)
		rows = append(rows, fmt.Sprintf("| %.0f | %.0f | %s | %.0f | %s | %s | %d | %d MiB | %d |", rate, f.throughput(), round(f.percentile(0.99)),
			g.throughput(), round(g.percentile(0.50)), round(g.percentile(0.99)), g.Failed, peak.rss>>20, peak.goroutines))
		served[i] = g.throughput()
		if g.throughput() >= 0.95*rate {
			followed = i
		}
	}
	// The knee is where Gatehouse stops following for good: a single step
	// below the rate, between steps it follows, is another process taking
	// the core for a moment, not capacity.
	knee := "Knee: not reached: Gatehouse served 95% of every offered rate."
	switch {
	case followed < 0:
		knee = fmt.Sprintf("Knee: below the first rate: Gatehouse served %.0f req/s of %.0f offered.", served[0], sc.Burst[0])
	case followed+1 < len(sc.Burst):
		knee = fmt.Sprintf("Knee: Gatehouse follows up to %.0f req/s offered and from %.0f req/s on serves %.0f-%.0f req/s (95%% of the offered rate is the bar).",
			sc.Burst[followed], sc.Burst[followed+1], slices.Min(served[followed+1:]), slices.Max(served[followed+1:]))
	}
	// Nothing crashed: the same process answers its health check.
	resp, err := env.HTTPClient.Get(env.URL + "/healthz")
	if err != nil {
		return nil, fmt.Errorf("after the burst: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("after the burst: /healthz answered %s", resp.Status)
	}
	return append(rows, "", knee, "After the burst the same Gatehouse process answered /healthz 200."), nil
}

type peaks struct {
	rss        int64
	goroutines int
}

type sampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	max  peaks
}

// startSampler reads pid's resident memory from /proc and the goroutine
// count from its metrics every 200 ms.
func startSampler(pid int, metricsURL string) *sampler {
	s := &sampler{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		client := &http.Client{Timeout: time.Second}
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			rss := residentBytes(pid)
			goroutines := scrapeGauge(client, metricsURL, "go_goroutines")
			s.mu.Lock()
			s.max.rss = max(s.max.rss, rss)
			s.max.goroutines = max(s.max.goroutines, goroutines)
			s.mu.Unlock()
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() peaks {
	close(s.done)
	s.wg.Wait()
	return s.max
}

func residentBytes(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// scrapeGauge reads one unlabelled gauge from a Prometheus text page.
func scrapeGauge(client *http.Client, url, name string) int {
	resp, err := client.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return int(f)
		}
	}
	return 0
}
