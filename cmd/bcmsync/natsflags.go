//go:build nats

package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/bcmsync/bcmsync/sync/distributed"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Secrets never come from the command line: every user of the machine can
// read a process's arguments (ps, /proc/PID/cmdline), while its
// environment and a mode-600 file only its owner can.
const (
	passwordEnv = "BCMSYNC_NATS_PASSWORD"
	tokenEnv    = "BCMSYNC_NATS_TOKEN"
	// spawnedEnv marks the agents `distributed` starts itself: the
	// coordinator has given the run's warnings once already.
	spawnedEnv = "BCMSYNC_SPAWNED_AGENT"
)

// secFlags are NATS's authentication and TLS and the run's message key;
// agent and distributed share them.
type secFlags struct {
	creds, nkey, user, passwordFile, tokenFile string
	tls                                        bool
	ca, cert, certKey, serverName              string
	key                                        string
}

func (s *secFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.key, "key", "", "authenticate every message of the run with the shared secret in `FILE` (HMAC-SHA256; the coordinator and every agent need the same file; make one with: openssl rand -base64 32 > FILE)")
	fs.StringVar(&s.creds, "creds", "", "NATS credentials `FILE` (user JWT and nkey seed, as nsc writes them)")
	fs.StringVar(&s.nkey, "nkey", "", "`FILE` holding the NATS nkey user seed (SU...) to sign in with")
	fs.StringVar(&s.user, "user", "", "NATS user `NAME`; the password comes from --password-file or $"+passwordEnv)
	fs.StringVar(&s.passwordFile, "password-file", "", "read the NATS password from `FILE` (never give it on the command line: ps shows it to every user)")
	fs.StringVar(&s.tokenFile, "token-file", "", "read the NATS token from `FILE` (or set $"+tokenEnv+")")
	fs.BoolVar(&s.tls, "tls", false, "use TLS, trusting the system's certificate authorities (implied by the --tls-* flags and a tls:// URL)")
	fs.StringVar(&s.ca, "tls-ca", "", "trust the certificate authorities in PEM `FILE` for the server's certificate")
	fs.StringVar(&s.cert, "tls-cert", "", "present the client certificate in PEM `FILE` (with --tls-key), for servers that verify clients")
	fs.StringVar(&s.certKey, "tls-key", "", "the private key of --tls-cert, PEM `FILE`")
	fs.StringVar(&s.serverName, "tls-server-name", "", "the `NAME` the server's certificate must carry (default: the host of --nats)")
}

// natsFlagNames maps a NATSSecurity field to its flag.
var natsFlagNames = map[string]string{"Creds": "--creds", "NkeySeed": "--nkey", "CA": "--tls-ca", "Cert": "--tls-cert", "CertKey": "--tls-key"}

// connecting reports whether a flag about the connection to the server is
// set (they need --nats: the embedded server takes none of them).
func (s *secFlags) connecting() string {
	for _, f := range []struct {
		set  bool
		name string
	}{{s.creds != "", "--creds"}, {s.nkey != "", "--nkey"}, {s.user != "", "--user"}, {s.passwordFile != "", "--password-file"},
		{s.tokenFile != "", "--token-file"}, {s.tls, "--tls"}, {s.ca != "", "--tls-ca"}, {s.cert != "", "--tls-cert"},
		{s.certKey != "", "--tls-key"}, {s.serverName != "", "--tls-server-name"}} {
		if f.set {
			return f.name
		}
	}
	return ""
}

// check reports inconsistent flags (a usage error).
func (s *secFlags) check() error {
	n := 0
	for _, set := range []bool{s.creds != "", s.nkey != "", s.user != "", s.tokenFile != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("give at most one of --creds, --nkey, --user and --token-file")
	}
	if s.passwordFile != "" && s.user == "" {
		return errors.New("--password-file needs --user NAME")
	}
	if (s.cert == "") != (s.certKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	return nil
}

// args returns the flags that give a spawned agent the same access, with
// absolute paths (secrets in files and the environment stay there).
func (s *secFlags) args() ([]string, error) {
	var a []string
	for _, f := range []struct{ name, val string }{
		{"--key", s.key}, {"--creds", s.creds}, {"--nkey", s.nkey}, {"--password-file", s.passwordFile}, {"--token-file", s.tokenFile},
		{"--tls-ca", s.ca}, {"--tls-cert", s.cert}, {"--tls-key", s.certKey},
	} {
		if f.val == "" {
			continue
		}
		abs, err := filepath.Abs(f.val)
		if err != nil {
			return nil, err
		}
		a = append(a, f.name, abs)
	}
	if s.user != "" {
		a = append(a, "--user", s.user)
	}
	if s.serverName != "" {
		a = append(a, "--tls-server-name", s.serverName)
	}
	if s.tls {
		a = append(a, "--tls")
	}
	return a, nil
}

// readSecret reads a password or token file: its bytes less one trailing
// line break (a secret may hold spaces).
func readSecret(flagName, file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", flagName, file, unwrapPath(err))
	}
	data = bytes.TrimSuffix(bytes.TrimSuffix(data, []byte("\n")), []byte("\r"))
	if len(data) == 0 {
		return "", fmt.Errorf("%s %s: the file is empty", flagName, file)
	}
	return string(data), nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// warnShared warns when a secret's file can be read by other users.
func warnShared(stderr io.Writer, flagName, file string) {
	if st, err := os.Stat(file); err == nil && st.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(stderr, "warning: %s %s can be read by other users (mode %04o): chmod 600 %s\n", flagName, file, st.Mode().Perm(), file)
	}
}

// natsOptions reads the credentials and returns the client options; every
// problem with a file names the flag and the file.
func (s *secFlags) natsOptions(stderr io.Writer, warn bool) ([]nats.Option, error) {
	sec := distributed.NATSSecurity{Creds: s.creds, NkeySeed: s.nkey, User: s.user, TLS: s.tls,
		CA: s.ca, Cert: s.cert, CertKey: s.certKey, ServerName: s.serverName}
	if s.user != "" {
		if s.passwordFile != "" {
			p, err := readSecret("--password-file", s.passwordFile)
			if err != nil {
				return nil, err
			}
			sec.Password = p
		} else if sec.Password = os.Getenv(passwordEnv); sec.Password == "" {
			return nil, fmt.Errorf("--user %s needs a password: --password-file FILE or $%s", s.user, passwordEnv)
		}
	}
	if s.tokenFile != "" {
		t, err := readSecret("--token-file", s.tokenFile)
		if err != nil {
			return nil, err
		}
		sec.Token = t
	} else if s.creds == "" && s.nkey == "" && s.user == "" {
		sec.Token = os.Getenv(tokenEnv)
	}
	opts, err := sec.Options()
	var fe *distributed.FileError
	if errors.As(err, &fe) {
		return nil, fmt.Errorf("%s %s: %v", natsFlagNames[fe.Field], fe.File, fe.Err)
	}
	if err != nil {
		return nil, err
	}
	if warn {
		for _, f := range []struct{ name, file string }{{"--creds", s.creds}, {"--nkey", s.nkey}, {"--password-file", s.passwordFile}, {"--token-file", s.tokenFile}, {"--tls-key", s.certKey}} {
			if f.file != "" {
				warnShared(stderr, f.name, f.file)
			}
		}
	}
	return opts, nil
}

// readKey reads --key (nil without it).
func (s *secFlags) readKey(stderr io.Writer, warn bool) ([]byte, error) {
	if s.key == "" {
		return nil, nil
	}
	key, err := distributed.ReadKey(s.key)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("--key %s: %v", s.key, pe.Err)
		}
		return nil, fmt.Errorf("--key %v", err)
	}
	if warn {
		warnShared(stderr, "--key", s.key)
	}
	return key, nil
}

// connect returns the options to connect to the external server at
// serverURL with s's credentials. Unless the agent was spawned by a
// coordinator (which warned already), it warns once about what an
// attacker could do: read a password in the URL from the process list, or
// inject messages into a run without --key.
func (s *secFlags) connect(serverURL string, key []byte, stderr io.Writer) ([]nats.Option, error) {
	warn := os.Getenv(spawnedEnv) == ""
	opts, err := s.natsOptions(stderr, warn)
	if err != nil {
		return nil, err
	}
	host := serverURL
	if u, err := url.Parse(serverURL); err == nil && u.Host != "" {
		if u.User != nil && warn {
			fmt.Fprintln(stderr, "warning: the --nats URL carries a user, password or token, which every user of this machine can read in the process list: use --user with --password-file, or --token-file")
		}
		host = u.Host
	}
	if warn && key == nil {
		fmt.Fprintf(stderr, "warning: messages are not authenticated (no --key): anyone who can publish on the NATS server at %s can inject poses or commands into the run (docs/distributed.md, Security)\n", host)
	}
	return opts, nil
}

// dialNATS connects, saying which flags to check when the server refuses.
func dialNATS(serverURL, name string, opts []nats.Option) (*distributed.NATSBus, error) {
	bus, err := distributed.DialNATS(serverURL, name, opts...)
	if err != nil && errors.Is(err, nats.ErrAuthorization) {
		err = fmt.Errorf("%w (check --creds, --nkey, --user and its password, or the token)", err)
	}
	return bus, err
}

// embeddedNATS starts the NATS server `distributed` runs without --nats:
// on the loopback interface only (agents elsewhere cannot reach it, and
// neither can anyone off this machine), with no monitoring, cluster,
// gateway, leaf node, websocket or MQTT port, and a random token that the
// agents it spawns get in their environment, so that other users of this
// machine cannot connect either.
func embeddedNATS() (*server.Server, string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, "", err
	}
	token := hex.EncodeToString(b[:])
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		MaxPayload: 64 << 20, Authorization: token})
	if err != nil {
		return nil, "", fmt.Errorf("starting the embedded NATS server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, "", errors.New("the embedded NATS server did not start within 10s")
	}
	return s, token, nil
}
