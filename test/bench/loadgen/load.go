package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// loadConfig bounds a run by count and by time; whichever ends first stops it.
type loadConfig struct {
	Requests    int
	Concurrency int
	Rate        float64 // requests per second, across all workers
	MaxDuration time.Duration

	Sustained        time.Duration // the mixed load's continuous run
	BurstConcurrency int
	BurstStep        time.Duration
}

// target is a server under load: the floor or Gatehouse.
type target struct {
	name, url string
	pid       int
}

// request is one review of a scenario: the webhook stream it belongs to,
// its body, and a text Gatehouse's answer must contain (the decision the
// fixture makes right); the floor's canned answer is not checked.
type request struct {
	Stream string
	Path   string // the scenario's when empty
	Body   []byte
	Want   string
}

type loadResult struct {
	Sent, Failed int
	Latencies    []time.Duration
	ByStream     map[string][]time.Duration
	// FirstError is one failure's cause, for the report.
	FirstError string
	Elapsed    time.Duration
	CPU        time.Duration // of the target process and the children it waited for (haproxy -c)
}

// merge pools two runs; latencies stay sorted.
func (r loadResult) merge(o loadResult) loadResult {
	out := loadResult{Sent: r.Sent + o.Sent, Failed: r.Failed + o.Failed, Elapsed: r.Elapsed + o.Elapsed, CPU: r.CPU + o.CPU,
		FirstError: r.FirstError, ByStream: map[string][]time.Duration{}}
	if out.FirstError == "" {
		out.FirstError = o.FirstError
	}
	out.Latencies = sortedUnion(r.Latencies, o.Latencies)
	for _, m := range []map[string][]time.Duration{r.ByStream, o.ByStream} {
		for stream, l := range m {
			out.ByStream[stream] = sortedUnion(out.ByStream[stream], l)
		}
	}
	return out
}

func sortedUnion(a, b []time.Duration) []time.Duration {
	out := append(append(make([]time.Duration, 0, len(a)+len(b)), a...), b...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (r loadResult) percentile(p float64) time.Duration { return percentile(r.Latencies, p) }

// percentile of sorted latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p)]
}

func (r loadResult) throughput() float64 { return float64(r.Sent-r.Failed) / r.Elapsed.Seconds() }

func (r loadResult) cpuPerRequest() time.Duration {
	if r.Sent == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Sent)
}

func newClient(ca []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, // one keep-alive connection per worker
		},
		// A redirect is a failed request, not a step to follow: the API
		// server follows none, and following them made the server path
		// measure two round trips (a 307 from /validate to /validate/)
		// without a single failure reported.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// runLoad sends the scenario's requests to url at a fixed rate from
// cfg.Concurrency workers, each on its own keep-alive connection, and
// measures each request. A request fails on a transport error, a status
// other than 200, or (when check is set) an answer without its Want text.
func runLoad(ctx context.Context, baseURL string, ca []byte, pid int, cfg loadConfig, next func(i int) request, check bool) (loadResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.MaxDuration)
	defer cancel()
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	indexes := make(chan int)
	go func() {
		defer close(indexes)
		start := time.Now()
		for i := 0; i < cfg.Requests; i++ {
			if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
					return
				}
			}
			select {
			case indexes <- i:
			case <-ctx.Done():
				return
			}
		}
	}()

	cpuBefore, err := processCPU(pid)
	if err != nil {
		return loadResult{}, err
	}
	var (
		mu  sync.Mutex
		res loadResult
		wg  sync.WaitGroup
	)
	begin := time.Now()
	for w := 0; w < cfg.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := newClient(ca)
			// Connections close with the run: none lingers into the next
			// as an idle server goroutine.
			defer client.CloseIdleConnections()
			var local []time.Duration
			byStream := map[string][]time.Duration{}
			failed, firstError := 0, ""
			for i := range indexes {
				req := next(i)
				t0 := time.Now()
				err := post(client, baseURL+req.Path, req, check)
				took := time.Since(t0)
				local = append(local, took)
				byStream[req.Stream] = append(byStream[req.Stream], took)
				if err != nil {
					failed++
					if firstError == "" {
						firstError = fmt.Sprintf("%s: %v", req.Stream, err)
					}
				}
			}
			mu.Lock()
			res.Latencies = append(res.Latencies, local...)
			if res.ByStream == nil {
				res.ByStream = map[string][]time.Duration{}
			}
			for stream, l := range byStream {
				res.ByStream[stream] = append(res.ByStream[stream], l...)
			}
			res.Sent += len(local)
			res.Failed += failed
			if res.FirstError == "" {
				res.FirstError = firstError
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(begin)
	cpuAfter, err := processCPU(pid)
	if err != nil {
		return loadResult{}, err
	}
	res.CPU = cpuAfter - cpuBefore
	sort.Slice(res.Latencies, func(i, j int) bool { return res.Latencies[i] < res.Latencies[j] })
	for _, l := range res.ByStream {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	}
	return res, nil
}

func post(client *http.Client, url string, req request, check bool) error {
	resp, err := client.Post(url, "application/json", bytes.NewReader(req.Body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %.200s", resp.StatusCode, answer)
	}
	if check && req.Want != "" && !bytes.Contains(answer, []byte(req.Want)) {
		return fmt.Errorf("answer without %s: %.300s", req.Want, answer)
	}
	return nil
}

// processCPU reads the user and system CPU time of pid and of the children
// it has waited for (configcheck's haproxy -c) from /proc (Linux).
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name; utime, stime, cutime and
	// cstime are the 14th to 17th fields of the line, in clock ticks
	// (USER_HZ = 100).
	rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
	fields := strings.Fields(rest)
	var ticks int64
	for _, f := range fields[11:15] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), nil
}
