package hugeheap

import "os"

// Env is the environment variable that turns Reserve off: "0" or "off".
const Env = "BCMSYNC_HUGEPAGES"

// Off reports whether the environment turns Reserve off.
func Off() bool {
	v := os.Getenv(Env)
	return v == "0" || v == "off"
}
