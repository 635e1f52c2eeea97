// Package natstest starts in-process NATS servers that require TLS with
// client certificates and authentication, with throwaway certificates and
// keys made for the test, for the security tests of sync/distributed and
// of the distributed commands. Nothing outside tests imports it.
package natstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Files are the PEM files WriteCerts makes: a CA, a server certificate for
// 127.0.0.1 and localhost signed by it, a client certificate signed by it,
// and a client certificate signed by another CA (which the server must
// refuse).
type Files struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	RogueCert, RogueKey                              string
}

// WriteCerts makes the certificates in dir.
func WriteCerts(tb testing.TB, dir string) *Files {
	tb.Helper()
	f := &Files{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
		RogueCert: filepath.Join(dir, "rogue.pem"), RogueKey: filepath.Join(dir, "rogue-key.pem"),
	}
	ca, caKey := authority(tb, "bcmsync test CA")
	write(tb, f.CA, "CERTIFICATE", ca.Raw)
	leaf(tb, ca, caKey, "nats server", x509.ExtKeyUsageServerAuth, f.ServerCert, f.ServerKey)
	leaf(tb, ca, caKey, "bcmsync agent", x509.ExtKeyUsageClientAuth, f.ClientCert, f.ClientKey)
	rogue, rogueKey := authority(tb, "someone else's CA")
	leaf(tb, rogue, rogueKey, "bcmsync agent", x509.ExtKeyUsageClientAuth, f.RogueCert, f.RogueKey)
	return f
}

// template is a certificate valid for a day from an hour ago.
func template(tb testing.TB, name string) *x509.Certificate {
	n, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		tb.Fatal(err)
	}
	return &x509.Certificate{SerialNumber: n, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
}

// issue makes a key and tmpl's certificate for it, signed by parent and
// parentKey (self-signed when they are nil).
func issue(tb testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return cert, key
}

func authority(tb testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	tmpl := template(tb, name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	return issue(tb, tmpl, nil, nil)
}

func leaf(tb testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, usage x509.ExtKeyUsage, certFile, keyFile string) {
	tmpl := template(tb, name)
	tmpl.KeyUsage, tmpl.ExtKeyUsage = x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{usage}
	tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
	cert, key := issue(tb, tmpl, ca, caKey)
	write(tb, certFile, "CERTIFICATE", cert.Raw)
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	write(tb, keyFile, "EC PRIVATE KEY", kd)
}

func write(tb testing.TB, file, kind string, der []byte) {
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// Auth is who the server lets in.
type Auth struct {
	Users map[string]string // user name -> password
	Nkeys []string          // public user nkeys
	Token string            // alone: token authorization
}

// Start runs a server on a free loopback port that requires TLS with a
// client certificate signed by f's CA, and a's authentication.
func Start(tb testing.TB, f *Files, a Auth) *server.Server {
	tb.Helper()
	opts := tlsOptions(tb, f)
	for u, p := range a.Users {
		opts.Users = append(opts.Users, &server.User{Username: u, Password: p})
	}
	for _, k := range a.Nkeys {
		opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: k})
	}
	opts.Authorization = a.Token
	return Run(tb, opts)
}

// StartPlain runs a server on a free loopback port with neither TLS nor
// authentication.
func StartPlain(tb testing.TB) *server.Server {
	tb.Helper()
	return Run(tb, &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true, MaxPayload: 64 << 20})
}

// StartOperator runs a TLS server as Start does, in operator (JWT) mode:
// it trusts one operator whose one account has one user, whose NATS
// credentials file (JWT and nkey seed) it writes to creds.
func StartOperator(tb testing.TB, f *Files, creds string) *server.Server {
	tb.Helper()
	op, _ := nkeys.CreateOperator()
	acc, _ := nkeys.CreateAccount()
	usr, _ := nkeys.CreateUser()
	opPub, _ := op.PublicKey()
	accPub, _ := acc.PublicKey()
	usrPub, _ := usr.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "bcmsync test operator"
	ac := jwt.NewAccountClaims(accPub)
	ac.Name = "bcmsync"
	accJWT, err := ac.Encode(op)
	if err != nil {
		tb.Fatal(err)
	}
	uc := jwt.NewUserClaims(usrPub)
	uc.Name = "agent"
	uc.IssuerAccount = accPub
	usrJWT, err := uc.Encode(acc)
	if err != nil {
		tb.Fatal(err)
	}
	seed, _ := usr.Seed()
	cfg, err := jwt.FormatUserConfig(usrJWT, seed)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(creds, cfg, 0o600); err != nil {
		tb.Fatal(err)
	}
	res := &server.MemAccResolver{}
	if err := res.Store(accPub, accJWT); err != nil {
		tb.Fatal(err)
	}
	opts := tlsOptions(tb, f)
	opts.TrustedOperators = []*jwt.OperatorClaims{oc}
	opts.AccountResolver = res
	return Run(tb, opts)
}

// NkeyUser makes a user nkey, writes its seed to file and returns its
// public key.
func NkeyUser(tb testing.TB, file string) string {
	tb.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		tb.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	if err := os.WriteFile(file, append(seed, '\n'), 0o600); err != nil {
		tb.Fatal(err)
	}
	return pub
}

func tlsOptions(tb testing.TB, f *Files) *server.Options {
	cfg, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: f.ServerCert, KeyFile: f.ServerKey, CaFile: f.CA, Verify: true})
	if err != nil {
		tb.Fatal(err)
	}
	return &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true, MaxPayload: 64 << 20,
		TLS: true, TLSVerify: true, TLSConfig: cfg, TLSTimeout: 5}
}

// Run starts a server with opts, waits until it takes connections and
// shuts it down when the test ends.
func Run(tb testing.TB, opts *server.Options) *server.Server {
	tb.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		tb.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		tb.Fatal("NATS server did not start")
	}
	tb.Cleanup(s.Shutdown)
	return s
}

// Client is the TLS configuration of a trusted client.
func Client(f *Files) *tls.Config {
	cert, _ := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(f.CA)
	pool.AppendCertsFromPEM(pem)
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{cert}}
}
