package app

import "github.com/go-logr/logr"

// controller-runtime's manager gives its lease up when told to stop
// (LeaderElectionReleaseOnCancel), and then reports the leader elector's
// end as the error "leader election lost", received after its stop sequence
// began: an error with a stack trace on every rolling update, for what is the
// release. managerLogger logs that report at info instead. A lease lost
// while the manager runs never reaches it: Manager.Start returns that error,
// and Gatehouse exits with it.
//
// The strings are controller-runtime's (pkg/manager/internal.go);
// TestGracefulLeaseReleaseIsLoggedAtInfo fails when an upgrade changes them.
const (
	stopSequenceError = "error received after stop sequence was engaged"
	leaderLost        = "leader election lost"
)

// managerLogger is log for the manager's own lines.
func managerLogger(log logr.Logger) logr.Logger {
	// The sink sits one call deeper than the manager's call site.
	sink := log.WithCallDepth(1).GetSink()
	if sink == nil {
		return log
	}
	return logr.New(releaseAtInfo{sink})
}

// releaseAtInfo passes every line on, but the graceful release's report.
type releaseAtInfo struct{ logr.LogSink }

// Init is done: the wrapped sink was initialized by its own logger.
func (releaseAtInfo) Init(logr.RuntimeInfo) {}

// Info is written out, not promoted, so that every line passes through one
// frame of releaseAtInfo (the call depth above).
func (s releaseAtInfo) Info(level int, msg string, keysAndValues ...any) {
	s.LogSink.Info(level, msg, keysAndValues...)
}

func (s releaseAtInfo) Error(err error, msg string, keysAndValues ...any) {
	if msg == stopSequenceError && err != nil && err.Error() == leaderLost {
		s.LogSink.Info(0, "leader lease released", keysAndValues...)
		return
	}
	s.LogSink.Error(err, msg, keysAndValues...)
}

func (s releaseAtInfo) WithValues(keysAndValues ...any) logr.LogSink {
	return releaseAtInfo{s.LogSink.WithValues(keysAndValues...)}
}

func (s releaseAtInfo) WithName(name string) logr.LogSink {
	return releaseAtInfo{s.LogSink.WithName(name)}
}

func (s releaseAtInfo) WithCallDepth(depth int) logr.LogSink {
	if d, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return releaseAtInfo{d.WithCallDepth(depth)}
	}
	return s
}
