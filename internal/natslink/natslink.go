// Package natslink connects bcmsync's distributed commands to NATS: a
// client connection (package sync/distributed/natsbus) and the embedded
// server. Only the bcmsync-nats program and the tests import it: it links
// the NATS client and server, which the bcmsync program leaves out so that
// its other commands start fast (see internal/cli.SetNATS).
package natslink

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/bcmsync/bcmsync/sync/distributed"
	"github.com/bcmsync/bcmsync/sync/distributed/natsbus"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Dial connects to the NATS server at url under the client name, signed
// in and secured as sec says; close ends the connection. A file of sec
// that cannot be used is a *distributed.FileError; a server that refuses
// the credentials gets an error that says which flags to check.
func Dial(url, name string, sec distributed.NATSSecurity) (bus distributed.Bus, close func(), err error) {
	b, err := natsbus.DialSecure(url, name, &sec)
	if err != nil {
		if errors.Is(err, nats.ErrAuthorization) {
			err = fmt.Errorf("%w (check --creds, --nkey, --user and its password, or the token)", err)
		}
		return nil, nil, err
	}
	return b, b.Close, nil
}

// Serve starts the embedded NATS server, for the processes of one run on
// this machine, and returns its URL, the token a client needs to connect
// and the function that stops it.
func Serve() (url, token string, stop func(), err error) {
	s, token, err := embedded()
	if err != nil {
		return "", "", nil, err
	}
	return s.ClientURL(), token, s.Shutdown, nil
}

// embedded starts a NATS server on a free port of the loopback interface
// only (agents elsewhere cannot reach it, and neither can anyone off this
// machine), with no monitoring, cluster, gateway, leaf node, websocket or
// MQTT port, and a random token, so that other users of this machine
// cannot connect either: the distributed command gives it to the agents
// it starts in their environment. Its payload limit fits the pose
// messages of large graphs (64 MB).
func embedded() (*server.Server, string, error) {
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
