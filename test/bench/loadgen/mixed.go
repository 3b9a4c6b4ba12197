package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/testing/devenv"
)

// stream is one webhook's share of a mixed load, in requests per thousand.
type stream struct {
	scenario scenario
	perMille int
}

// mixed interleaves the streams' requests in a fixed shuffled order of
// 1,000 slots, so every second of the load carries every webhook in its
// share. Each stream's setup and probe run first.
func mixed(sustained time.Duration, streams []stream) scenario {
	var slots []int
	for s, st := range streams {
		for range st.perMille {
			slots = append(slots, s)
		}
	}
	if len(slots) != 1000 {
		panic(fmt.Sprintf("mixed load shares add up to %d per mille", len(slots)))
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(slots), func(i, j int) { slots[i], slots[j] = slots[j], slots[i] })
	return scenario{
		Name:      "mixed-all-webhooks",
		Sustained: sustained,
		Setup: func(ctx context.Context, env *devenv.Env) error {
			for _, st := range streams {
				if err := prepare(ctx, env, st.scenario); err != nil {
					return err
				}
			}
			return nil
		},
		Next: func(i int) request {
			st := streams[slots[i%len(slots)]].scenario
			r := st.Next(i)
			r.Path = st.Path
			return r
		},
	}
}

// prepare runs a scenario's setup and its probe.
func prepare(ctx context.Context, env *devenv.Env, sc scenario) error {
	if sc.Setup != nil {
		if err := sc.Setup(ctx, env); err != nil {
			return fmt.Errorf("scenario %s: setup: %w", sc.Name, err)
		}
	}
	if sc.Probe != nil {
		if err := probe(ctx, env.URL+sc.Path, env.CACert, sc.Probe(), sc.ProbeWant); err != nil {
			return fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
	}
	return nil
}

// streamRows are the per-webhook latencies of one run.
func streamRows(scenarioName string, r loadResult) []string {
	var names []string
	for name := range r.ByStream {
		names = append(names, name)
	}
	slices.Sort(names)
	var rows []string
	for _, name := range names {
		l := r.ByStream[name]
		rows = append(rows, fmt.Sprintf("| %s | %s | %d | %s | %s | %s |", scenarioName, name, len(l),
			round(percentile(l, 0.50)), round(percentile(l, 0.99)), round(l[len(l)-1])))
	}
	return rows
}
