package distributed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// NATSBus is a Bus over a NATS connection: pose subjects are plain
// publish-subscribe, commands NATS request-reply. NATS delivers at most
// once and in order per publisher; the protocol's sequence numbers and
// checks make lost, late or repeated messages harmless.
type NATSBus struct {
	nc *nats.Conn
}

// DialNATS connects to the NATS server at url (for example
// nats://127.0.0.1:4222) under the given client name, with the further
// options given (NATSSecurity.Options makes those of a secured server).
// The client reconnects by itself after a server restart; Close ends it.
func DialNATS(url, name string, opts ...nats.Option) (*NATSBus, error) {
	nc, err := nats.Connect(url, append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1)}, opts...)...)
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

// Publish implements Bus.
func (b *NATSBus) Publish(subject string, data []byte) error {
	return b.nc.Publish(subject, data)
}

// Subscribe implements Bus.
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

// Serve implements Bus.
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

// Request implements Bus.
func (b *NATSBus) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	m, err := b.nc.RequestWithContext(ctx, subject, data)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("%s: %w", subject, ErrNoResponders)
		}
		return nil, err
	}
	return m.Data, nil
}

// NATSSecurity says how a client proves who it is to a NATS server and how
// it secures the connection: NATS's own authentication (at most one of
// Creds, NkeySeed, User and Token) and TLS. Files are read and checked by
// Options; Password and Token are the secrets themselves, which a program
// should read from a file or the environment, never take from its command
// line, where every user of the machine can read them (ps, /proc).
type NATSSecurity struct {
	// Creds is a NATS credentials file (a user JWT and its nkey seed, as
	// nsc writes them), for servers in operator/JWT mode.
	Creds string
	// NkeySeed is a file holding an nkey user seed (SU...), for servers
	// that list users by their public nkey.
	NkeySeed string
	// User and Password, for servers with user/password authorization.
	User, Password string
	// Token, for servers with token authorization.
	Token string
	// TLS turns on TLS with the system's certificate authorities; CA, Cert
	// and ServerName imply it.
	TLS bool
	// CA is a PEM file of the authorities whose signature on the server's
	// certificate is trusted (instead of the system's).
	CA string
	// Cert and CertKey are PEM files of the client's certificate and its
	// private key, for servers that verify clients (TLS verify).
	Cert, CertKey string
	// ServerName is the name the server's certificate must carry (default:
	// the host of the URL).
	ServerName string
}

// FileError is a credential or certificate file of a NATSSecurity that
// cannot be used. Field names the NATSSecurity field.
type FileError struct {
	Field, File string
	Err         error
}

func (e *FileError) Error() string { return fmt.Sprintf("%s: %v", e.File, e.Err) }
func (e *FileError) Unwrap() error { return e.Err }

// Enabled reports whether s asks for authentication or TLS.
func (s *NATSSecurity) Enabled() bool {
	return s.Creds != "" || s.NkeySeed != "" || s.User != "" || s.Token != "" || s.secure()
}

func (s *NATSSecurity) secure() bool {
	return s.TLS || s.CA != "" || s.Cert != "" || s.CertKey != "" || s.ServerName != ""
}

// Options checks s and its files and returns the NATS client options that
// apply it. Every problem with a file is a *FileError naming it.
func (s *NATSSecurity) Options() ([]nats.Option, error) {
	n := 0
	for _, set := range []bool{s.Creds != "", s.NkeySeed != "", s.User != "", s.Token != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, errors.New("give at most one of a credentials file, an nkey seed, a user and a token")
	}
	if (s.User == "") != (s.Password == "") {
		return nil, errors.New("a user needs a password, and a password a user")
	}
	var opts []nats.Option
	fail := func(field, file string, err error) ([]nats.Option, error) {
		if pe, ok := err.(*fs.PathError); ok {
			err = pe.Err // the error names the file already
		}
		return nil, &FileError{Field: field, File: file, Err: err}
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
	if !s.secure() {
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
	if (s.Cert == "") != (s.CertKey == "") {
		return nil, errors.New("a client certificate needs its key, and a key its certificate")
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
