package bfeconf

import (
	"errors"
	"fmt"
)

// PolicyError is a refusal that is this project's own policy: BFE 1.8.5 loads the configuration,
// but the driver refuses it because it is ambiguous, relies on BFE defaults, or fails only later at
// request time (for example an unbracketed IPv6 instance address). Everything Validate reports
// that is not a PolicyError is refused by BFE itself.
type PolicyError struct{ Err error }

func (e *PolicyError) Error() string { return e.Err.Error() + " (lbfed policy; BFE accepts it)" }
func (e *PolicyError) Unwrap() error { return e.Err }

func policyf(format string, args ...any) error { return &PolicyError{Err: fmt.Errorf(format, args...)} }

// SplitPolicy separates the leaves of a (joined, wrapped) validation error into the refusals BFE
// makes itself and the ones that are only this project's policy. Context added by wrapping with
// fmt.Errorf("...: %w") is kept in the returned messages.
func SplitPolicy(err error) (bfe, policy []error) {
	var walk func(prefix string, err error)
	walk = func(prefix string, err error) {
		if err == nil {
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(prefix, e)
			}
			return
		}
		// A wrapped join: descend with the wrapper's context.
		if inner := errors.Unwrap(err); inner != nil {
			if j, ok := inner.(interface{ Unwrap() []error }); ok {
				ctx := err.Error()
				if s := inner.Error(); len(ctx) >= len(s) {
					ctx = ctx[:len(ctx)-len(s)]
				}
				for _, e := range j.Unwrap() {
					walk(prefix+ctx, e)
				}
				return
			}
		}
		var p *PolicyError
		if errors.As(err, &p) {
			policy = append(policy, withPrefix(prefix, err))
			return
		}
		bfe = append(bfe, withPrefix(prefix, err))
	}
	walk("", err)
	return bfe, policy
}

func withPrefix(prefix string, err error) error {
	if prefix == "" {
		return err
	}
	return fmt.Errorf("%s%w", prefix, err)
}
