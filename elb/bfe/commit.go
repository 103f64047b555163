package bfe

import (
	"context"
	"sync"
	"time"
)

// committer coalesces concurrent model changes: every change queued while a commit is running is
// applied in the next commit, so a burst of N driver calls costs one or two write+reload cycles
// instead of N. Each caller waits for the commit that contains its change.
type committer struct {
	fe      *Frontend
	metrics *Metrics
	// linger delays each commit to gather more changes (0: commit at once; changes arriving during a
	// commit are batched anyway).
	linger  time.Duration
	timeout time.Duration

	mu      sync.Mutex
	pending []*change
	busy    bool
}

// change is one caller's model mutation. mutate must either fail without touching the model or
// succeed.
type change struct {
	mutate func(*Model) error
	done   chan struct{}
	// results, valid after done is closed
	err      error // the mutation's own error; the change was not applied
	applyErr error // the commit's error; nothing of the batch was applied
	result   *ApplyResult
}

// do queues mutate and waits until the commit that contains it finished or ctx ends. A caller that
// gives up still has its change committed; LBCF calls are idempotent and retried.
func (c *committer) do(ctx context.Context, mutate func(*Model) error) (*change, error) {
	ch := &change{mutate: mutate, done: make(chan struct{})}
	c.mu.Lock()
	c.pending = append(c.pending, ch)
	if !c.busy {
		c.busy = true
		go c.drain()
	}
	c.mu.Unlock()
	select {
	case <-ch.done:
		return ch, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *committer) drain() {
	for {
		if c.linger > 0 {
			time.Sleep(c.linger)
		}
		c.mu.Lock()
		batch := c.pending
		c.pending = nil
		if len(batch) == 0 {
			c.busy = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.commit(batch)
	}
}

func (c *committer) commit(batch []*change) {
	c.metrics.batch(len(batch))
	model := c.fe.Model()
	for _, ch := range batch {
		ch.err = ch.mutate(model)
	}
	// The commit must not depend on any one caller's context: it serves the whole batch.
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	res, err := c.fe.Apply(ctx, model)
	for _, ch := range batch {
		ch.result, ch.applyErr = res, err
		close(ch.done)
	}
}
