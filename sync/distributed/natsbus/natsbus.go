// Package natsbus is the NATS transport of the distributed solver: a
// distributed.Bus over a NATS connection, for a coordinator and agents in
// separate processes or on separate machines, signed in to a secured
// server with SecurityOptions. It is a package of its own so that package
// distributed, and a program that runs it over another Bus, does not link
// the NATS client.
package natsbus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/bcmsync/bcmsync/sync/distributed"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// NATSBus is a distributed.Bus over a NATS connection: pose subjects are plain
// publish-subscribe, commands NATS request-reply. NATS delivers at most
// once and in order per publisher; the protocol's sequence numbers and
// checks make lost, late or repeated messages harmless.
type NATSBus struct {
	nc *nats.Conn
}

// DialNATS connects to the NATS server at url (for example
// nats://127.0.0.1:4222) under the given client name, with the further
// options given (SecurityOptions makes those of a secured server).
// The client reconnects by itself after a server restart; Close ends it.
func DialNATS(url, name string, opts ...nats.Option) (*NATSBus, error) {
	nc, err := nats.Connect(url, append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", url, err)
	}
	return &NATSBus{nc: nc}, nil
}

// DialSecure connects as DialNATS does, signed in and secured as sec says
// (SecurityOptions): a file of sec that cannot be used is a
// *distributed.FileError, returned before any connection is tried.
func DialSecure(url, name string, sec *distributed.NATSSecurity) (*NATSBus, error) {
	opts, err := SecurityOptions(sec)
	if err != nil {
		return nil, err
	}
	return DialNATS(url, name, opts...)
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

// SecurityOptions checks sec and its files and returns the NATS client
// options that apply it, for DialNATS. Every problem with a file is a
// *distributed.FileError naming the field and the file.
func SecurityOptions(s *distributed.NATSSecurity) ([]nats.Option, error) {
	if err := s.Check(); err != nil {
		return nil, err
	}
	var opts []nats.Option
	fail := func(field, file string, err error) ([]nats.Option, error) {
		if pe, ok := err.(*fs.PathError); ok {
			err = pe.Err // the error names the file already
		}
		return nil, &distributed.FileError{Field: field, File: file, Err: err}
	}
	switch {
	case s.Creds != "":
		data, err := os.ReadFile(s.Creds)
		if err != nil {
			return fail("Creds", s.Creds, err)
		}
		jwt, err := nkeys.ParseDecoratedJWT(data)
		if err == nil && (strings.Count(jwt, ".") != 2 || strings.ContainsAny(jwt, " \n")) {
			err = errors.New("no user JWT in it (a NATS credentials file has a user JWT and an nkey seed)")
		}
		if err == nil {
			_, err = nkeys.ParseDecoratedUserNKey(data)
			if err != nil {
				err = fmt.Errorf("no user nkey seed in it: %w", err)
			}
		}
		if err != nil {
			return fail("Creds", s.Creds, err)
		}
		opts = append(opts, nats.UserCredentials(s.Creds))
	case s.NkeySeed != "":
		data, err := os.ReadFile(s.NkeySeed)
		if err != nil {
			return fail("NkeySeed", s.NkeySeed, err)
		}
		if _, err := nkeys.ParseDecoratedUserNKey(data); err != nil {
			return fail("NkeySeed", s.NkeySeed, fmt.Errorf("not an nkey user seed (SU...): %w", err))
		}
		o, err := nats.NkeyOptionFromSeed(s.NkeySeed)
		if err != nil {
			return fail("NkeySeed", s.NkeySeed, err)
		}
		opts = append(opts, o)
	case s.User != "":
		opts = append(opts, nats.UserInfo(s.User, s.Password))
	case s.Token != "":
		opts = append(opts, nats.Token(s.Token))
	}
	if !s.UsesTLS() {
		return opts, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
	if s.CA != "" {
		pem, err := os.ReadFile(s.CA)
		if err != nil {
			return fail("CA", s.CA, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return fail("CA", s.CA, errors.New("no PEM certificate in it"))
		}
	}
	if s.Cert != "" {
		for field, file := range map[string]string{"Cert": s.Cert, "CertKey": s.CertKey} {
			if _, err := os.Stat(file); err != nil {
				return fail(field, file, err)
			}
		}
		cert, err := tls.LoadX509KeyPair(s.Cert, s.CertKey)
		if err != nil {
			return fail("Cert", s.Cert, fmt.Errorf("with key %s: %w", s.CertKey, err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return append(opts, nats.Secure(cfg)), nil
}
