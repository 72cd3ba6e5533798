package certificate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
)

// The node events of a certificate that could not be had. client-go's
// manager retries each with its back-off (2s doubling to 32s, then every
// 32s), so berth only says so.
const (
	ReasonCSRDenied      = "CertificateSigningRequestDenied"
	ReasonCSRFailed      = "CertificateSigningRequestFailed"
	ReasonCSRNotApproved = "CertificateSigningRequestNotApproved"
	ReasonRequestFailed  = "CertificateRequestFailed"
)

// failure decides the node event for one of the certificate manager's
// error reports (msg is client-go's message, err its cause): which reason,
// and a message for a person. Reports that are not about a request berth
// made give ok false.
func failure(kind, msg string, err error) (reason, message string, ok bool) {
	if err == nil {
		return "", "", false
	}
	text := err.Error()
	switch {
	case strings.HasPrefix(msg, "Reached backoff limit"):
		// Each try was reported already; the manager goes on every 32s.
		return "", "", false
	case strings.Contains(text, "signing request is denied"):
		return ReasonCSRDenied, fmt.Sprintf("the %s certificate's signing request was denied (%v); requesting again with back-off", kind, err), true
	case strings.Contains(text, "signing request failed"):
		return ReasonCSRFailed, fmt.Sprintf("the %s certificate's signing request failed (%v); requesting again with back-off", kind, err), true
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(text, "timed out waiting"):
		return ReasonCSRNotApproved, fmt.Sprintf("the %s certificate's signing request was not approved and issued in time (%v); requesting again with back-off", kind, err), true
	case errors.Is(err, context.Canceled):
		// Stopped, or the template changed: not a failure.
		return "", "", false
	}
	return ReasonRequestFailed, fmt.Sprintf("requesting the %s certificate failed: %s: %v; trying again with back-off", kind, msg, err), true
}

// reporter turns the certificate manager's error reports into node events;
// until a recorder is set they are only logged.
type reporter struct {
	kind   string
	log    *slog.Logger
	record atomic.Pointer[func(eventType, reason, message string)]
}

func (r *reporter) report(msg string, err error) {
	reason, message, ok := failure(r.kind, msg, err)
	if !ok {
		return
	}
	r.log.Warn(message, "reason", reason)
	if rec := r.record.Load(); rec != nil {
		(*rec)(v1.EventTypeWarning, reason, message)
	}
}

// logger is the klog logger client-go's manager logs through: berth's own
// log, with every error report also handed to report.
func (r *reporter) logger(log *slog.Logger) logr.Logger {
	return logr.New(reportingSink{LogSink: logr.FromSlogHandler(log.Handler()).GetSink(), report: r.report})
}

// reportingSink is a logr sink that hands each error to report as well.
type reportingSink struct {
	logr.LogSink
	report func(msg string, err error)
}

func (s reportingSink) Error(err error, msg string, keysAndValues ...any) {
	s.LogSink.Error(err, msg, keysAndValues...)
	s.report(msg, err)
}

func (s reportingSink) WithValues(keysAndValues ...any) logr.LogSink {
	return reportingSink{LogSink: s.LogSink.WithValues(keysAndValues...), report: s.report}
}

func (s reportingSink) WithName(name string) logr.LogSink {
	return reportingSink{LogSink: s.LogSink.WithName(name), report: s.report}
}
