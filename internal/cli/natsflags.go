package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"

	"github.com/bcmsync/bcmsync/sync/distributed"
)

// The security flags of the distributed commands need no NATS: bcmsync
// parses and checks them before it hands the command over to bcmsync-nats
// (see execNATS), and the NATS link applies the settings they gather, a
// distributed.NATSSecurity (its Dial reads and checks the files).

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
// inputs adds the files the flags name to set, as inputs: the files rule
// then refuses an output (-o, --report, ...) that would overwrite a key,
// a credentials file or a certificate.
func (s *secFlags) inputs(set *fileSet) {
	for _, f := range []struct{ what, path string }{
		{"--key", s.key}, {"--creds", s.creds}, {"--nkey", s.nkey}, {"--password-file", s.passwordFile},
		{"--token-file", s.tokenFile}, {"--tls-ca", s.ca}, {"--tls-cert", s.cert}, {"--tls-key", s.certKey},
	} {
		set.input(f.what, f.path)
	}
}

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

// security gathers the settings to sign in to the server with s's flags,
// reading the password or token (from its file or the environment); the
// NATS link reads and checks the other files when it connects (dial).
// With warn it warns about secret files other users can read.
func (s *secFlags) security(stderr io.Writer, warn bool) (distributed.NATSSecurity, error) {
	sec := distributed.NATSSecurity{Creds: s.creds, NkeySeed: s.nkey, User: s.user, TLS: s.tls,
		CA: s.ca, Cert: s.cert, CertKey: s.certKey, ServerName: s.serverName}
	if s.user != "" {
		if s.passwordFile != "" {
			p, err := readSecret("--password-file", s.passwordFile)
			if err != nil {
				return sec, err
			}
			sec.Password = p
		} else if sec.Password = os.Getenv(passwordEnv); sec.Password == "" {
			return sec, fmt.Errorf("--user %s needs a password: --password-file FILE or $%s", s.user, passwordEnv)
		}
	}
	if s.tokenFile != "" {
		t, err := readSecret("--token-file", s.tokenFile)
		if err != nil {
			return sec, err
		}
		sec.Token = t
	} else if s.creds == "" && s.nkey == "" && s.user == "" {
		sec.Token = os.Getenv(tokenEnv)
	}
	if warn {
		for _, f := range []struct{ name, file string }{{"--creds", s.creds}, {"--nkey", s.nkey}, {"--password-file", s.passwordFile}, {"--token-file", s.tokenFile}, {"--tls-key", s.certKey}} {
			if f.file != "" {
				warnShared(stderr, f.name, f.file)
			}
		}
	}
	return sec, nil
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

// connect returns the settings to connect to the external server at
// serverURL with s's credentials. Unless the agent was spawned by a
// coordinator (which warned already), it warns once about what an
// attacker could do: read a password in the URL from the process list, or
// inject messages into a run without --key.
func (s *secFlags) connect(serverURL string, key []byte, stderr io.Writer) (distributed.NATSSecurity, error) {
	warn := os.Getenv(spawnedEnv) == ""
	sec, err := s.security(stderr, warn)
	if err != nil {
		return sec, err
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
	return sec, nil
}

// dial connects through the NATS link with sec; a credential or
// certificate file that cannot be used is named by its flag.
func dial(serverURL, name string, sec distributed.NATSSecurity) (bus distributed.Bus, closeBus func(), err error) {
	bus, closeBus, err = natsLink.Dial(serverURL, name, sec)
	var fe *distributed.FileError
	if errors.As(err, &fe) {
		err = fmt.Errorf("%s %s: %v", natsFlagNames[fe.Field], fe.File, fe.Err)
	}
	return bus, closeBus, err
}
