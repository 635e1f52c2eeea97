package distributed

import (
	"context"
	"errors"
	"fmt"
	stdsync "sync"
	"sync/atomic"
)

// Bus is the transport between the coordinator and the agents: NATS in a
// deployment (package sync/distributed/natsbus), channels in one process
// (NewMemBus). Its
// semantics are NATS core's: publish-subscribe with no delivery guarantee,
// each subscription's messages handled in order on its own goroutine, and
// request-reply on a subject one handler serves.
type Bus interface {
	// Publish sends data to every current subscriber of subject.
	Publish(subject string, data []byte) error
	// Subscribe calls h with every message on subject, in order, until the
	// returned function is called.
	Subscribe(subject string, h func(data []byte)) (unsubscribe func(), err error)
	// Serve answers requests on subject with h's reply.
	Serve(subject string, h func(req []byte) []byte) (stop func(), err error)
	// Request sends data to subject's server and waits for its reply.
	Request(ctx context.Context, subject string, data []byte) ([]byte, error)
}

// Subjects: the agent's public poses and its command queue.
func poseSubject(prefix string, k int) string  { return fmt.Sprintf("%s.pose.%d", prefix, k) }
func agentSubject(prefix string, k int) string { return fmt.Sprintf("%s.agent.%d", prefix, k) }

// MemBus is an in-process Bus over channels. Drop, if set, is asked about
// every published message and every request; a true answer loses it, as a
// network may (tests of the fault handling).
type MemBus struct {
	mu      stdsync.Mutex
	subs    map[string][]*memSub
	servers map[string]*memSub
	Drop    func(subject string) bool
}

type memSub struct {
	ch   chan []byte
	reqs chan memRequest // a server's queue
	done chan struct{}
	once stdsync.Once
}

// NewMemBus returns an empty in-process bus.
func NewMemBus() *MemBus {
	return &MemBus{subs: map[string][]*memSub{}, servers: map[string]*memSub{}}
}

// memQueue is a subscription's buffer; a full buffer drops, as NATS does
// with a slow consumer.
const memQueue = 4096

func (b *MemBus) dropped(subject string) bool {
	return b.Drop != nil && b.Drop(subject)
}

// Publish implements Bus.
func (b *MemBus) Publish(subject string, data []byte) error {
	if b.dropped(subject) {
		return nil
	}
	b.mu.Lock()
	subs := append([]*memSub(nil), b.subs[subject]...)
	b.mu.Unlock()
	for _, s := range subs {
		msg := append([]byte(nil), data...)
		select {
		case s.ch <- msg:
		case <-s.done:
		default:
		}
	}
	return nil
}

func (b *MemBus) start(h func([]byte)) *memSub {
	s := &memSub{ch: make(chan []byte, memQueue), done: make(chan struct{})}
	go func() {
		for {
			select {
			case m := <-s.ch:
				h(m)
			case <-s.done:
				return
			}
		}
	}()
	return s
}

// Subscribe implements Bus.
func (b *MemBus) Subscribe(subject string, h func([]byte)) (func(), error) {
	s := b.start(h)
	b.mu.Lock()
	b.subs[subject] = append(b.subs[subject], s)
	b.mu.Unlock()
	return func() {
		s.once.Do(func() { close(s.done) })
		b.mu.Lock()
		list := b.subs[subject]
		for k, t := range list {
			if t == s {
				b.subs[subject] = append(list[:k:k], list[k+1:]...)
				break
			}
		}
		b.mu.Unlock()
	}, nil
}

// memRequest carries a request and where its reply goes.
type memRequest struct {
	data  []byte
	reply chan []byte
}

// Serve implements Bus.
func (b *MemBus) Serve(subject string, h func([]byte) []byte) (func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.servers[subject] != nil {
		return nil, fmt.Errorf("membus: %s already served", subject)
	}
	reqs := make(chan memRequest, memQueue)
	s := &memSub{reqs: reqs, done: make(chan struct{})}
	go func() {
		for {
			select {
			case r := <-reqs:
				out := h(r.data)
				if out != nil {
					r.reply <- out
				}
			case <-s.done:
				return
			}
		}
	}()
	b.servers[subject] = s
	return func() {
		s.once.Do(func() { close(s.done) })
		b.mu.Lock()
		if b.servers[subject] == s {
			delete(b.servers, subject)
		}
		b.mu.Unlock()
	}, nil
}

// ErrNoResponders is wrapped in the error of a Request that nobody serves
// (MemBus, and natsbus.NATSBus for NATS's own "no responders"): the coordinator
// then waits and resends, since an agent may be starting or restarting.
var ErrNoResponders = errors.New("no responders")

// Request implements Bus.
func (b *MemBus) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	b.mu.Lock()
	s := b.servers[subject]
	b.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("%s: %w", subject, ErrNoResponders)
	}
	if b.dropped(subject) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	r := memRequest{data: append([]byte(nil), data...), reply: make(chan []byte, 1)}
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.done:
		return nil, fmt.Errorf("%s: %w", subject, ErrNoResponders)
	}
	select {
	case out := <-r.reply:
		return out, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.done:
		return nil, fmt.Errorf("%s: %w", subject, ErrNoResponders)
	}
}

// Counter counts a bus's traffic: messages and payload bytes sent by
// Publish, and by Request and its replies.
type Counter struct {
	Bus
	Messages, Bytes atomic.Int64
}

// Publish implements Bus.
func (c *Counter) Publish(subject string, data []byte) error {
	c.Messages.Add(1)
	c.Bytes.Add(int64(len(data)))
	return c.Bus.Publish(subject, data)
}

// Request implements Bus.
func (c *Counter) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	c.Messages.Add(1)
	c.Bytes.Add(int64(len(data)))
	out, err := c.Bus.Request(ctx, subject, data)
	if err == nil {
		c.Messages.Add(1)
		c.Bytes.Add(int64(len(out)))
	}
	return out, err
}
