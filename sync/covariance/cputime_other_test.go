//go:build !unix

package covariance_test

import "time"

// cpuTime is 0 where getrusage is not available: the benchmark then
// reports wall time only.
func cpuTime() time.Duration { return 0 }
