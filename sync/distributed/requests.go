package distributed

import (
	"context"
	"errors"
	"fmt"
	stdsync "sync"
	"time"
)

// The coordinator's requests: resending, healing lost pose messages,
// bringing restarted agents back, and running one command per part at once.

// request sends one command to agent k and returns its checked reply,
// resending after each Try until Timeout: an agent that restarted in
// between answers the resent command. An agent that answers "not in this
// run" has restarted and lost its state; request then reports errRestarted.
func (c *coordinator) request(ctx context.Context, k int, m *message) (*message, error) {
	m.Kind, m.Part, m.Run = kindCmd, coordinatorPart, c.run
	data := encode(nil, m)
	subject := agentSubject(c.opts.Subject, k)
	deadline := time.Now().Add(c.opts.Timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tctx, cancel := context.WithTimeout(ctx, min(c.opts.Try, time.Until(deadline)))
		out, err := c.bus.Request(tctx, subject, data)
		cancel()
		c.mu.Lock()
		n := int64(len(data))
		c.stats.Requests++
		if err == nil {
			c.stats.Requests++
			n += int64(len(out))
		}
		c.stats.RequestBytes += n
		if m.Op == opGather || m.Op == opSet || (m.Op == opEigLift && m.Norm2 == 1) {
			c.stats.TransferBytes += n
		}
		if m.Op >= opProveSetup && m.Op <= opProveFactor {
			c.stats.ProofBytes += n
		}
		if m.Op >= opRoundSetup && m.Op <= opRoundBack {
			c.stats.RoundingBytes += n
		}
		if m.Op >= opEigReduce && m.Op <= opEigLift || (m.Op == opProveFactor && m.Dot > 0) {
			c.stats.EscapeBytes += n
		}
		c.mu.Unlock()
		if err != nil {
			lastErr = err
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, ErrNoResponders) {
				// Nobody serves the subject yet (starting or restarting).
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		rep, err := decode(out)
		if err != nil {
			lastErr = fmt.Errorf("malformed reply: %w", err)
			c.opts.Sync.Logger.Warn("reply rejected", "part", k, "err", err)
			continue
		}
		if rep.Kind != kindReply || rep.Part != k || rep.Op != m.Op || rep.Round != m.Round {
			lastErr = fmt.Errorf("reply does not match the command (kind %d part %d op %d round %d)", rep.Kind, rep.Part, rep.Op, rep.Round)
			c.opts.Sync.Logger.Warn("reply rejected", "part", k, "err", lastErr)
			continue
		}
		c.mu.Lock()
		if rep.Sent > 0 {
			c.stats.Publications++
			c.stats.PublicationBytes += int64(rep.Sent)
		}
		if int64(rep.Mem) > c.stats.AgentRSS[k] {
			c.stats.AgentRSS[k] = int64(rep.Mem)
		}
		c.mu.Unlock()
		switch rep.Status {
		case statusNoRun:
			return rep, errRestarted
		case statusError:
			return nil, fmt.Errorf("agent %d: %s", k, rep.Text)
		}
		return rep, nil
	}
	return nil, fmt.Errorf("agent %d did not answer within %v: %v", k, c.opts.Timeout, lastErr)
}

var errRestarted = errors.New("agent restarted")

// requestHealed sends the command mk makes to agent k; if the agent
// answers that public poses it needs never arrived (a lost message), the
// parts that sent them publish again and the command, remade with their
// new sequence numbers, is sent once more. The parts asked are k's
// neighbours, never of k's colour, so they are not updating meanwhile.
func (c *coordinator) requestHealed(ctx context.Context, k int, mk func() *message) (*message, error) {
	c.mu.Lock()
	m := mk()
	c.mu.Unlock()
	rep, err := c.request(ctx, k, m)
	if err != nil || rep.Status != statusStale || len(rep.Needs) == 0 {
		return rep, err
	}
	for _, n := range rep.Needs {
		if n.Part < 0 || n.Part >= c.p.K {
			return nil, fmt.Errorf("agent %d: stale reply names part %d", k, n.Part)
		}
		c.mu.Lock()
		c.stats.Republished++
		c.mu.Unlock()
		pr, err := c.request(ctx, n.Part, &message{Op: opPublish, Rank: c.rank})
		if errors.Is(err, errRestarted) {
			err = c.rejoin(ctx, n.Part)
		} else if err == nil {
			c.mu.Lock()
			c.seq[n.Part] = max(c.seq[n.Part], pr.Seq)
			c.mu.Unlock()
		}
		if err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	m = mk()
	c.mu.Unlock()
	return c.request(ctx, k, m)
}

// parallel runs f for every part in ks at once and returns the first error.
func parallel(ks []int, f func(k int) error) error {
	errs := make([]error, len(ks))
	var wg stdsync.WaitGroup
	for n, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[n] = f(k)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rejoin brings a restarted agent back into the run. It lost its state,
// so it starts again from its own chordal estimate, aligned, as at the
// start, to its neighbours' current public poses, which they publish again
// for it. Its sequence numbers continue from the last one the coordinator
// saw, so its neighbours accept its new poses. The neighbours are of other
// colours than the agent whose request failed, so they are idle meanwhile.
func (c *coordinator) rejoin(ctx context.Context, k int) error {
	c.mu.Lock()
	c.stats.Restarts++
	seq := c.seq[k]
	c.mu.Unlock()
	c.opts.Sync.Logger.Warn("agent restarted; rejoining from its neighbours' public poses", "part", k)
	rep, err := c.request(ctx, k, &message{Op: opInit, Rank: c.rank, Seq: seq, Text: c.fingerprint, Ints: c.partInts})
	if err != nil {
		return fmt.Errorf("rejoining agent %d: %w", k, err)
	}
	c.joined(k, rep)
	for _, q := range c.nb[k] {
		rep, err := c.request(ctx, q, &message{Op: opPublish, Rank: c.rank})
		if err != nil {
			return fmt.Errorf("rejoining agent %d: republishing agent %d: %w", k, q, err)
		}
		c.mu.Lock()
		c.seq[q] = rep.Seq
		c.mu.Unlock()
	}
	c.mu.Lock()
	needs := c.needsOf(k, nil)
	c.mu.Unlock()
	rep, err = c.request(ctx, k, &message{Op: opAlign, Rank: c.rank, Needs: needs})
	if err != nil {
		return fmt.Errorf("rejoining agent %d: %w", k, err)
	}
	if rep.Status != statusOK {
		return fmt.Errorf("rejoining agent %d: its neighbours' poses did not arrive", k)
	}
	c.mu.Lock()
	c.seq[k] = rep.Seq
	c.mu.Unlock()
	return nil
}

// stopAll tells every agent to end; failures are only logged.
func (c *coordinator) stopAll() {
	for k := 0; k < c.p.K; k++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		m := &message{Kind: kindCmd, Part: coordinatorPart, Run: c.run, Op: opStop}
		if _, err := c.bus.Request(ctx, agentSubject(c.opts.Subject, k), encode(nil, m)); err != nil {
			c.opts.Sync.Logger.Warn("stopping agent", "part", k, "err", err)
		}
		cancel()
	}
}
