package natsbus_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/internal/natstest"
	"github.com/bcmsync/bcmsync/sync/distributed"
	"github.com/bcmsync/bcmsync/sync/distributed/natsbus"
)

// The other ways in: a credentials file (operator mode) and a token; and
// the refusals without them.
func TestSecureNATSCredsAndToken(t *testing.T) {
	dir := t.TempDir()
	f := natstest.WriteCerts(t, dir)
	creds := filepath.Join(dir, "agent.creds")
	s := natstest.StartOperator(t, f, creds)
	tlsOnly := distributed.NATSSecurity{CA: f.CA, Cert: f.ClientCert, CertKey: f.ClientKey}
	withCreds := tlsOnly
	withCreds.Creds = creds
	bus, err := natsbus.DialSecure(s.ClientURL(), "agent", &withCreds)
	if err != nil {
		t.Fatalf("with the credentials file: %v", err)
	}
	bus.Close()
	if bus, err := natsbus.DialSecure(s.ClientURL(), "intruder", &tlsOnly); err == nil {
		bus.Close()
		t.Error("operator mode: connected without credentials")
	}

	ts := natstest.Start(t, f, natstest.Auth{Token: "the token"})
	withToken := tlsOnly
	withToken.Token = "the token"
	bus, err = natsbus.DialSecure(ts.ClientURL(), "agent", &withToken)
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	bus.Close()
	withToken.Token = "a guess"
	if bus, err := natsbus.DialSecure(ts.ClientURL(), "intruder", &withToken); err == nil {
		bus.Close()
		t.Error("connected with a wrong token")
	}
}

// SecurityOptions refuses missing and ill-formed files with a FileError
// naming the field and the file, and inconsistent settings.
func TestNATSSecurityErrors(t *testing.T) {
	dir := t.TempDir()
	f := natstest.WriteCerts(t, dir)
	seed := filepath.Join(dir, "agent.nk")
	natstest.NkeyUser(t, seed)
	junk := filepath.Join(dir, "junk.txt")
	if err := os.WriteFile(junk, []byte("not a credential\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, c := range []struct {
		sec         distributed.NATSSecurity
		field, file string
	}{
		{distributed.NATSSecurity{Creds: missing}, "Creds", missing},
		{distributed.NATSSecurity{Creds: junk}, "Creds", junk},
		{distributed.NATSSecurity{Creds: seed}, "Creds", seed},
		{distributed.NATSSecurity{NkeySeed: missing}, "NkeySeed", missing},
		{distributed.NATSSecurity{NkeySeed: junk}, "NkeySeed", junk},
		{distributed.NATSSecurity{CA: missing}, "CA", missing},
		{distributed.NATSSecurity{CA: junk}, "CA", junk},
		{distributed.NATSSecurity{Cert: missing, CertKey: f.ClientKey}, "Cert", missing},
		{distributed.NATSSecurity{Cert: f.ClientCert, CertKey: missing}, "CertKey", missing},
		{distributed.NATSSecurity{Cert: junk, CertKey: f.ClientKey}, "Cert", junk},
		{distributed.NATSSecurity{Cert: f.ClientCert, CertKey: f.ServerKey}, "Cert", f.ClientCert},
	} {
		_, err := natsbus.SecurityOptions(&c.sec)
		var fe *distributed.FileError
		if !errors.As(err, &fe) || fe.Field != c.field || fe.File != c.file || !strings.Contains(err.Error(), c.file) {
			t.Errorf("%+v: %v; want a FileError for %s %s", c.sec, err, c.field, c.file)
			continue
		}
		t.Log(err)
	}
	for _, sec := range []distributed.NATSSecurity{
		{NkeySeed: seed, Token: "t"},
		{User: "u"},
		{Password: "p"},
		{Cert: f.ClientCert},
	} {
		if _, err := natsbus.SecurityOptions(&sec); err == nil {
			t.Errorf("%+v accepted", sec)
		}
	}
	if opts, err := natsbus.SecurityOptions(&distributed.NATSSecurity{}); err != nil || len(opts) != 0 {
		t.Errorf("no security: %d options, %v", len(opts), err)
	}
}
