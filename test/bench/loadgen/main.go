// Command loadgen is the HTTPS half of `make bench`. It starts a real control
// plane, the gatehouse binary (every module on) and a bare TLS server that
// answers a canned allow (the floor), then sends the same AdmissionReviews to
// both at a fixed rate and concurrency over keep-alive connections, and prints
// latency percentiles, throughput and CPU time per request for each, with
// their ratio. Runs are bounded in count and time and target loopback only.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/catalogue"
	"github.com/gatehouse-dev/gatehouse/internal/testing/devenv"
	"github.com/gatehouse-dev/gatehouse/internal/testing/testenv"
)

func main() {
	var (
		floorDir = flag.String("serve-floor", "", "internal: serve the floor with the certificates in this directory")
		cfg      loadConfig
		only     = flag.String("scenario", "", "run only the scenarios whose name contains this")
		out      = flag.String("out", "bin/bench-loadgen.md", "where to write the results table")
		extra    = flag.String("gatehouse-args", "", "extra flags for the gatehouse process")
		pinFlag  = flag.Bool("pin", true, "pin the servers to CPU 1 and the load generator to CPU 0")
	)
	flag.IntVar(&cfg.Requests, "requests", 20000, "requests per target and scenario")
	flag.IntVar(&cfg.Concurrency, "concurrency", 8, "workers, each with one keep-alive connection")
	flag.Float64Var(&cfg.Rate, "rate", 2000, "requests per second across all workers")
	flag.DurationVar(&cfg.MaxDuration, "max-duration", 60*time.Second, "upper bound of one target's run")
	flag.DurationVar(&cfg.Sustained, "sustained", 60*time.Second, "length of the mixed load's continuous run per target (at -rate)")
	flag.IntVar(&cfg.BurstConcurrency, "burst-concurrency", 64, "connections of the burst")
	flag.DurationVar(&cfg.BurstStep, "burst-step", 5*time.Second, "length of each offered rate of the burst")
	flag.Parse()
	pinCPUs = pinFlag
	if *floorDir != "" {
		if err := serveFloor(*floorDir); err != nil {
			fmt.Fprintln(os.Stderr, "floor:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, cfg, *only, *out, strings.Fields(*extra))
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

var pinCPUs *bool

// rounds splits each target's requests into alternating rounds.
const rounds = 5

func run(ctx context.Context, cfg loadConfig, only, out string, extraArgs []string) error {
	dir, err := os.MkdirTemp("", "gatehouse-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var names []string
	for _, m := range catalogue.All() {
		names = append(names, m.Name())
	}
	fmt.Println("loadgen: starting control plane and gatehouse (modules:", strings.Join(names, ","), ")")
	metricsPort, err := testenv.FreePort()
	if err != nil {
		return err
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", metricsPort)
	metricsURL := "http://" + metricsAddr + "/metrics"
	env, err := devenv.Start(ctx, devenv.Options{
		Dir: dir, WebhookAddr: "127.0.0.1:19443", MetricsAddr: metricsAddr, Modules: strings.Join(names, ","),
		ExtraArgs: extraArgs,
	})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()

	floor := exec.Command(os.Args[0], "-serve-floor", filepath.Join(dir, "certs"))
	floor.Stderr = os.Stderr
	stdout, err := floor.StdoutPipe()
	if err != nil {
		return err
	}
	if err := floor.Start(); err != nil {
		return err
	}
	defer func() { _ = floor.Process.Kill(); _ = floor.Wait() }()
	floorAddr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return fmt.Errorf("floor did not start: %w", err)
	}
	floorURL := "https://" + strings.TrimSpace(floorAddr)
	if *pinCPUs {
		for _, pid := range []int{floor.Process.Pid, env.Process.Process.Pid} {
			if err := pin(pid, 1); err != nil {
				return err
			}
		}
		if err := pin(os.Getpid(), 0); err != nil {
			return err
		}
	}

	table := []string{
		fmt.Sprintf("requests %d per target in %d alternating rounds (the mixed load: %s continuous per target), concurrency %d, rate %.0f/s, keep-alive HTTPS on loopback, servers pinned to one CPU: %v",
			cfg.Requests, rounds, cfg.Sustained, cfg.Concurrency, cfg.Rate, *pinCPUs),
		"",
		"| scenario | target | requests | p50 | p99 | throughput (req/s) | CPU/request | failed |",
		"|---|---|---|---|---|---|---|---|",
	}
	var ratios, perWebhook, burstRows []string
	floorTarget := target{"floor", floorURL, floor.Process.Pid}
	gatehouseTarget := target{"gatehouse", env.URL, env.Process.Process.Pid}
	for _, sc := range scenarios(cfg.Sustained) {
		if only != "" && !strings.Contains(sc.Name, only) {
			continue
		}
		if err := prepare(ctx, env, sc); err != nil {
			return err
		}
		next := func(i int) request {
			r := sc.Next(i)
			if r.Path == "" {
				r.Path = sc.Path
			}
			return r
		}
		if len(sc.Burst) > 0 {
			rows, err := runBurst(ctx, env, cfg, sc, next, floorTarget, gatehouseTarget, metricsURL)
			if err != nil {
				return err
			}
			burstRows = append(burstRows, rows...)
			continue
		}
		cfg := cfg
		if sc.Rate > 0 {
			cfg.Rate, cfg.Requests = sc.Rate, sc.Requests
		}
		warm := cfg
		warm.Requests = min(cfg.Requests/10, 2000)
		targets := []target{floorTarget, gatehouseTarget}
		for _, t := range targets {
			if _, err := runLoad(ctx, t.url, env.CACert, t.pid, warm, next, t.name == "gatehouse"); err != nil {
				return err
			}
		}
		results := map[string]loadResult{}
		if sc.Sustained > 0 {
			// One continuous run per target.
			sustained := cfg
			sustained.Requests = int(cfg.Rate * sc.Sustained.Seconds())
			sustained.MaxDuration = sc.Sustained + 30*time.Second
			for _, t := range targets {
				res, err := runLoad(ctx, t.url, env.CACert, t.pid, sustained, next, t.name == "gatehouse")
				if err != nil {
					return err
				}
				results[t.name] = res
			}
		} else {
			// Rounds alternate the targets (and which goes first), so that
			// drift on the machine during the run weighs on both alike.
			perRound := cfg
			perRound.Requests = cfg.Requests / rounds
			for r := 0; r < rounds; r++ {
				for i := range targets {
					t := targets[(i+r)%len(targets)]
					res, err := runLoad(ctx, t.url, env.CACert, t.pid, perRound, next, t.name == "gatehouse")
					if err != nil {
						return err
					}
					results[t.name] = results[t.name].merge(res)
				}
			}
		}
		for _, t := range targets {
			res := results[t.name]
			table = append(table, fmt.Sprintf("| %s | %s | %d | %s | %s | %.0f | %s | %d |", sc.Name, t.name, res.Sent,
				round(res.percentile(0.50)), round(res.percentile(0.99)), res.throughput(), round(res.cpuPerRequest()), res.Failed))
		}
		g, f := results["gatehouse"], results["floor"]
		if g.Failed > 0 {
			return fmt.Errorf("scenario %s: %d of %d requests to gatehouse failed; one: %s", sc.Name, g.Failed, g.Sent, g.FirstError)
		}
		ratios = append(ratios, fmt.Sprintf("| %s | %.2f | %.2f | %.2f | %.2f |", sc.Name,
			ratio(g.percentile(0.50), f.percentile(0.50)), ratio(g.percentile(0.99), f.percentile(0.99)),
			f.throughput()/g.throughput(), ratio(g.cpuPerRequest(), f.cpuPerRequest())))
		if len(g.ByStream) > 1 {
			perWebhook = append(perWebhook, streamRows(sc.Name, g)...)
		}
	}
	table = append(table, "", "Ratio gatehouse / floor (throughput: floor / gatehouse):", "",
		"| scenario | p50 | p99 | throughput | CPU/request |", "|---|---|---|---|---|")
	table = append(table, ratios...)
	if len(perWebhook) > 0 {
		table = append(table, "", "Gatehouse per webhook in the mixed load:", "",
			"| scenario | webhook | requests | p50 | p99 | max |", "|---|---|---|---|---|---|")
		table = append(table, perWebhook...)
	}
	if len(burstRows) > 0 {
		table = append(table, "", burstHeader(cfg))
		table = append(table, burstRows...)
	}
	report := strings.Join(table, "\n") + "\n"
	fmt.Print("\n" + report)
	if out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			return err
		}
		fmt.Println("loadgen: table written to", out)
	}
	return nil
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func round(d time.Duration) time.Duration {
	switch {
	case d > time.Millisecond:
		return d.Round(10 * time.Microsecond)
	default:
		return d.Round(time.Microsecond)
	}
}

// probe posts body until the answer contains want.
func probe(ctx context.Context, url string, ca, body []byte, want string) error {
	c := newClient(ca)
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = string(b)
		if strings.Contains(last, want) {
			return nil
		}
	}
	return fmt.Errorf("probe: no answer containing %q; last: %s", want, last)
}
