// Package natsbus is the NATS transport of the distributed solver: a
// distributed.Bus over a NATS connection, for a coordinator and agents in
// separate processes or on separate machines. It is a package of its own
// so that package distributed, and a program that runs it over another
// Bus, does not link the NATS client.
package natsbus

import (
	"context"
	"errors"
	"fmt"

	"github.com/bcmsync/bcmsync/sync/distributed"
	"github.com/nats-io/nats.go"
)

// NATSBus is a distributed.Bus over a NATS connection: pose subjects are plain
// publish-subscribe, commands NATS request-reply. NATS delivers at most
// once and in order per publisher; the protocol's sequence numbers and
// checks make lost, late or repeated messages harmless.
type NATSBus struct {
	nc *nats.Conn
}

// DialNATS connects to the NATS server at url (for example
// nats://127.0.0.1:4222) under the given client name. The client
// reconnects by itself after a server restart; Close ends it.
func DialNATS(url, name string) (*NATSBus, error) {
	nc, err := nats.Connect(url, nats.Name(name), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", url, err)
	}
	return &NATSBus{nc: nc}, nil
}

// NewNATSBus wraps an open connection.
func NewNATSBus(nc *nats.Conn) *NATSBus { return &NATSBus{nc: nc} }

// Close drains and closes the connection.
func (b *NATSBus) Close() {
	_ = b.nc.Drain()
}

// Publish implements distributed.Bus.
func (b *NATSBus) Publish(subject string, data []byte) error {
	return b.nc.Publish(subject, data)
}

// Subscribe implements distributed.Bus.
func (b *NATSBus) Subscribe(subject string, h func([]byte)) (func(), error) {
	sub, err := b.nc.Subscribe(subject, func(m *nats.Msg) { h(m.Data) })
	if err != nil {
		return nil, err
	}
	// Pose messages are large and bursty: never drop them for a slow
	// handler before the client's memory limit.
	_ = sub.SetPendingLimits(-1, 1<<30)
	return func() { _ = sub.Unsubscribe() }, nil
}

// Serve implements distributed.Bus.
func (b *NATSBus) Serve(subject string, h func([]byte) []byte) (func(), error) {
	sub, err := b.nc.Subscribe(subject, func(m *nats.Msg) {
		if out := h(m.Data); out != nil && m.Reply != "" {
			_ = m.Respond(out)
		}
	})
	if err != nil {
		return nil, err
	}
	if err := b.nc.Flush(); err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// Request implements distributed.Bus.
func (b *NATSBus) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	m, err := b.nc.RequestWithContext(ctx, subject, data)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("%s: %w", subject, distributed.ErrNoResponders)
		}
		return nil, err
	}
	return m.Data, nil
}

var _ distributed.Bus = (*NATSBus)(nil)
