package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
)

// secureSetup makes a demo graph, throwaway certificates, an agent nkey, a
// coordinator password file and a run key in a temporary folder, and
// starts a server that requires TLS with client certificates and either
// credential.
func secureSetup(t *testing.T) (dir, in string, f *natstest.Files, s *server.Server) {
	t.Helper()
	dir = t.TempDir()
	in = demoFile(t, dir, "in.g2o")
	f = natstest.WriteCerts(t, dir)
	pub := natstest.NkeyUser(t, filepath.Join(dir, "agent.nk"))
	for name, data := range map[string]string{"coord.pw": "a long coordinator password\n", "run.key": "c2VjcmV0IHJ1biBrZXkgZm9yIHRoZSB0ZXN0cyBvZiBiY21zeW5jCg==\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s = natstest.Start(t, f, natstest.Auth{Users: map[string]string{"coordinator": "a long coordinator password"}, Nkeys: []string{pub}})
	return dir, in, f, s
}

// A secured run from the command line: agents sign in with an nkey, the
// coordinator with a user and a password file, all over TLS with client
// certificates, every message authenticated with --key; it certifies, and
// the summary and the report say that messages were authenticated and
// none was rejected. An agent without credentials is refused.
func TestDistributedSecureServer(t *testing.T) {
	dir, in, f, s := secureSetup(t)
	tlsFlags := []string{"--tls-ca", f.CA, "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey}
	common := append([]string{"--nats", s.ClientURL(), "--agents", "2", "--split", "bfs", "--key", filepath.Join(dir, "run.key")}, tlsFlags...)

	code, _, stderr := runCmd(append(append([]string{"agent", "--part", "0"}, common...), in)...)
	if code != 1 || !strings.Contains(stderr, "Authorization Violation") {
		t.Errorf("agent without credentials: exit %d, %s", code, stderr)
	}

	done := make(chan string, 2)
	for k := 0; k < 2; k++ {
		go func() {
			code, _, stderr := runCmd(append(append([]string{"agent", "--part", strconv.Itoa(k), "--nkey", filepath.Join(dir, "agent.nk")}, common...), in)...)
			done <- fmt.Sprintf("agent %d: exit %d %s", k, code, stderr)
		}()
	}
	report := filepath.Join(dir, "run.json")
	code, stdout, stderr := runCmd(append(append([]string{"distributed", "--no-spawn", "--report", report,
		"--user", "coordinator", "--password-file", filepath.Join(dir, "coord.pw")}, common...), in)...)
	if code != 0 || !strings.Contains(stdout, "CERTIFIED globally optimal") || !strings.Contains(stdout, "messages authenticated (--key); rejected 0 forged, 0 replayed, 0 foreign") {
		t.Fatalf("coordinator: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if strings.Contains(stderr, "warning") {
		t.Errorf("warnings in a secured run: %s", stderr)
	}
	for k := 0; k < 2; k++ {
		if msg := <-done; !strings.Contains(msg, "exit 0") {
			t.Error(msg)
		}
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Distributed *struct {
			Authenticated bool `json:"authenticated"`
			Rejected      struct {
				Forged, Replayed, Foreign *int64
			} `json:"rejected"`
		} `json:"distributed"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if d := rep.Distributed; d == nil || !d.Authenticated || d.Rejected.Forged == nil || *d.Rejected.Forged != 0 || d.Rejected.Replayed == nil || d.Rejected.Foreign == nil {
		t.Errorf("report's distributed section: %s", data)
	}

	// The coordinator starts the agents itself on the secured server: they
	// get the same credential and key flags (the nkey, for all of them).
	code, stdout, stderr = runCmd(append(append([]string{"distributed", "--nkey", filepath.Join(dir, "agent.nk")}, common...), in)...)
	if code != 0 || !strings.Contains(stdout, "messages authenticated") || strings.Contains(stderr, "warning") {
		t.Errorf("spawned agents on the secured server: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// Without --key, connecting to a server that is not the embedded one warns
// once, from the coordinator, not again from the agents it starts; with the
// embedded server nothing warns.
func TestDistributedUnauthenticatedWarnsOnce(t *testing.T) {
	s := natstest.StartPlain(t)
	in := demoFile(t, t.TempDir(), "in.g2o")
	const warning = "messages are not authenticated (no --key)"
	code, stdout, stderr := runCmd("distributed", "--nats", s.ClientURL(), "--agents", "2", in)
	if code != 0 || strings.Count(stderr, warning) != 1 || !strings.Contains(stdout, "messages not authenticated") {
		t.Errorf("external server: exit %d, %d warnings:\n%s", code, strings.Count(stderr, warning), stderr)
	}
	code, _, stderr = runCmd("distributed", "--agents", "2", in)
	if code != 0 || strings.Contains(stderr, "warning") {
		t.Errorf("embedded server: exit %d:\n%s", code, stderr)
	}
}

// Credential flags: a missing or ill-formed file is an error naming the
// flag and the file; inconsistent flags are usage errors; none of this
// starts a server or an agent.
func TestDistributedCredentialErrors(t *testing.T) {
	dir, in, f, _ := secureSetup(t)
	junk := filepath.Join(dir, "junk.txt")
	short := filepath.Join(dir, "short.key")
	for file, data := range map[string]string{junk: "not a credential\n", short: "secret\n"} {
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "missing")
	agent := []string{"agent", "--nats", "nats://127.0.0.1:1", "--agents", "2", "--part", "0"}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--nkey", missing}, 1, "--nkey " + missing + ": no such file"},
		{[]string{"--nkey", junk}, 1, "--nkey " + junk + ": not an nkey user seed"},
		{[]string{"--creds", junk}, 1, "--creds " + junk + ": no user JWT"},
		{[]string{"--tls-ca", junk}, 1, "--tls-ca " + junk + ": no PEM certificate"},
		{[]string{"--tls-ca", missing}, 1, "--tls-ca " + missing + ": no such file"},
		{[]string{"--tls-cert", f.ClientCert, "--tls-key", missing}, 1, "--tls-key " + missing + ": no such file"},
		{[]string{"--tls-cert", junk, "--tls-key", f.ClientKey}, 1, "--tls-cert " + junk},
		{[]string{"--user", "u", "--password-file", missing}, 1, "--password-file " + missing + ": no such file"},
		{[]string{"--token-file", filepath.Join(dir, "coord.pw"), "--key", short}, 1, "--key " + short + ": the key is 6 bytes"},
		{[]string{"--key", missing}, 1, "--key " + missing + ": no such file"},
		{[]string{"--user", "u"}, 1, "--user u needs a password"},
		{[]string{"--password-file", junk}, 2, "--password-file needs --user"},
		{[]string{"--nkey", junk, "--creds", junk}, 2, "at most one of"},
		{[]string{"--tls-cert", f.ClientCert}, 2, "--tls-cert and --tls-key go together"},
	} {
		code, _, stderr := runCmd(append(append(append([]string{}, agent...), c.args...), in)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
	code, _, stderr := runCmd("distributed", "--agents", "2", "--tls-ca", f.CA, in)
	if code != 2 || !strings.Contains(stderr, "--tls-ca needs --nats URL") {
		t.Errorf("credentials for the embedded server: exit %d, %q", code, stderr)
	}
	// A key others can read works, with a warning.
	open := filepath.Join(dir, "open.key")
	if err := os.WriteFile(open, []byte(strings.Repeat("k", 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr := runCmdErr(t, append(append(append([]string{}, agent...), "--key", open), in)...); !strings.Contains(stderr, "can be read by other users (mode 0644): chmod 600 "+open) {
		t.Errorf("no warning for a key others can read: %q", stderr)
	}
}

// runCmdErr runs a command expected to fail at connecting.
func runCmdErr(t *testing.T, args ...string) (int, string) {
	t.Helper()
	code, _, stderr := runCmd(args...)
	if code == 0 {
		t.Errorf("%v succeeded", args)
	}
	return code, stderr
}
