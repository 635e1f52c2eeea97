package cli

import "github.com/bcmsync/bcmsync/internal/natslink"

// The tests run the distributed commands in process, and their agents as
// children of the test binary (TestMain), over the NATS link bcmsync-nats
// has; the handing over to bcmsync-nats that bcmsync does instead is
// tested on the built programs (TestNATSProgram).
func init() {
	SetNATS(NATS{Dial: natslink.Dial, Serve: natslink.Serve})
}
