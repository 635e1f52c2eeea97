// Package natslink connects bcmsync's distributed commands to NATS: a
// client connection (package sync/distributed/natsbus) and the embedded
// server. Only the bcmsync-nats program and the tests import it: it links
// the NATS client and server, which the bcmsync program leaves out so that
// its other commands start fast (see internal/cli.SetNATS).
package natslink

import (
	"errors"
	"fmt"
	"time"

	"github.com/bcmsync/bcmsync/sync/distributed"
	"github.com/bcmsync/bcmsync/sync/distributed/natsbus"
	"github.com/nats-io/nats-server/v2/server"
)

// Dial connects to the NATS server at url under the client name; close
// ends the connection.
func Dial(url, name string) (bus distributed.Bus, close func(), err error) {
	b, err := natsbus.DialNATS(url, name)
	if err != nil {
		return nil, nil, err
	}
	return b, b.Close, nil
}

// Serve starts a NATS server on a free port of the loopback interface,
// for the processes of one run on this machine, and returns its URL and
// the function that stops it. Its payload limit fits the pose messages of
// large graphs (64 MB).
func Serve() (url string, stop func(), err error) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true, MaxPayload: 64 << 20})
	if err != nil {
		return "", nil, fmt.Errorf("starting the embedded NATS server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return "", nil, errors.New("the embedded NATS server did not start within 10s")
	}
	return s.ClientURL(), s.Shutdown, nil
}
