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
	if log.GetSink() == nil {
		return log
	}
	return logr.New(newReleaseAtInfo(log.GetSink()))
}

// releaseAtInfo passes every line on, but the graceful release's report.
// Info is the wrapped sink's own method (promoted: no frame of its own, so
// the caller stays the manager's line); Error is written out here, one
// frame deeper, so it writes through deeper, the sink one call deeper.
type releaseAtInfo struct {
	logr.LogSink
	deeper logr.LogSink
}

func newReleaseAtInfo(sink logr.LogSink) releaseAtInfo {
	deeper := sink
	if d, ok := sink.(logr.CallDepthLogSink); ok {
		deeper = d.WithCallDepth(1)
	}
	return releaseAtInfo{LogSink: sink, deeper: deeper}
}

// Init is done: the wrapped sink was initialized by its own logger.
func (releaseAtInfo) Init(logr.RuntimeInfo) {}

func (s releaseAtInfo) Error(err error, msg string, keysAndValues ...any) {
	if msg == stopSequenceError && err != nil && err.Error() == leaderLost {
		s.deeper.Info(0, "leader lease released", keysAndValues...)
		return
	}
	s.deeper.Error(err, msg, keysAndValues...)
}

func (s releaseAtInfo) WithValues(keysAndValues ...any) logr.LogSink {
	return newReleaseAtInfo(s.LogSink.WithValues(keysAndValues...))
}

func (s releaseAtInfo) WithName(name string) logr.LogSink {
	return newReleaseAtInfo(s.LogSink.WithName(name))
}

func (s releaseAtInfo) WithCallDepth(depth int) logr.LogSink {
	if d, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return newReleaseAtInfo(d.WithCallDepth(depth))
	}
	return s
}
