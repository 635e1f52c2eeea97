package distributed

import (
	"errors"
	"fmt"
)

// NATSSecurity says how a client proves who it is to a NATS server and how
// it secures the connection: NATS's own authentication (at most one of
// Creds, NkeySeed, User and Token) and TLS. It is plain data, here rather
// than in package natsbus, so that a program can gather and check it
// without linking the NATS client; natsbus.SecurityOptions reads its files
// and turns it into the client's options. Password and Token are the
// secrets themselves, which a program should read from a file or the
// environment, never take from its command line, where every user of the
// machine can read them (ps, /proc).
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
	return s.Creds != "" || s.NkeySeed != "" || s.User != "" || s.Token != "" || s.UsesTLS()
}

// UsesTLS reports whether s asks for TLS.
func (s *NATSSecurity) UsesTLS() bool {
	return s.TLS || s.CA != "" || s.Cert != "" || s.CertKey != "" || s.ServerName != ""
}

// Check reports settings that contradict each other, without reading any
// file: more than one way of signing in, a user without a password (or a
// password without a user), a client certificate without its key.
func (s *NATSSecurity) Check() error {
	n := 0
	for _, set := range []bool{s.Creds != "", s.NkeySeed != "", s.User != "", s.Token != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("give at most one of a credentials file, an nkey seed, a user and a token")
	}
	if (s.User == "") != (s.Password == "") {
		return errors.New("a user needs a password, and a password a user")
	}
	if (s.Cert == "") != (s.CertKey == "") {
		return errors.New("a client certificate needs its key, and a key its certificate")
	}
	return nil
}
