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
}

type loadResult struct {
	Sent, Failed int
	Latencies    []time.Duration
	Elapsed      time.Duration
	CPU          time.Duration // of the target process
}

// merge pools two runs; latencies stay sorted.
func (r loadResult) merge(o loadResult) loadResult {
	out := loadResult{Sent: r.Sent + o.Sent, Failed: r.Failed + o.Failed, Elapsed: r.Elapsed + o.Elapsed, CPU: r.CPU + o.CPU}
	out.Latencies = append(append(make([]time.Duration, 0, len(r.Latencies)+len(o.Latencies)), r.Latencies...), o.Latencies...)
	sort.Slice(out.Latencies, func(i, j int) bool { return out.Latencies[i] < out.Latencies[j] })
	return out
}

func (r loadResult) percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(float64(len(r.Latencies)-1) * p)
	return r.Latencies[i]
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
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, // one keep-alive connection per worker
	}}
}

// runLoad sends bodies to url at a fixed rate from cfg.Concurrency workers,
// each on its own keep-alive connection, and measures each request.
func runLoad(ctx context.Context, url string, ca []byte, pid int, cfg loadConfig, body func(i int) []byte) (loadResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.MaxDuration)
	defer cancel()
	interval := time.Duration(float64(time.Second) / cfg.Rate)
	next := make(chan int)
	go func() {
		defer close(next)
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
			case next <- i:
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
			var local []time.Duration
			failed := 0
			for i := range next {
				t0 := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(body(i)))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				local = append(local, time.Since(t0))
				if err != nil {
					failed++
				}
			}
			mu.Lock()
			res.Latencies = append(res.Latencies, local...)
			res.Sent += len(local)
			res.Failed += failed
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
	return res, nil
}

// processCPU reads user+system CPU time of pid from /proc (Linux).
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the line, in clock ticks (USER_HZ = 100).
	rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
	fields := strings.Fields(rest)
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * (time.Second / 100), nil
}
