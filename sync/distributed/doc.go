// Package distributed solves pose-graph optimization with several agents,
// each owning one part of the graph, and certifies the result exactly as
// package sync does (issue 21).
//
// # Partitions
//
// A Partition assigns each pose to one of K agents: by robot (ByRobot: the
// GTSAM Symbol convention of multi-robot g2o files, where pose j of robot
// 'a' has the id ('a' << 56) | j), by contiguous runs of pose indices
// (Contiguous: DPGO's split of single-robot graphs), by bands of a
// breadth-first order (BFS), by recursive spectral bisection (Spectral:
// cuts where the graph is weakly coupled, which the rounds need; the
// command's default), or from a file of "id part" lines (ReadPartition). An agent holds its poses, the rows of Q at them (its
// internal edges and the shared edges to other agents' public poses), and
// copies of the public poses it borders, as their owners publish them.
// Only the coordinator splits the graph: it sends its partition with the
// command that makes an agent join, and an agent started with none
// (RunAgent's p nil, as the agent command does) builds its part from it
// and then lets the rest of the graph go.
//
// # The algorithm
//
// Agents start from a distributed initialization: each computes the
// chordal estimate of its own subgraph, and then, along a breadth-first
// order of the agent graph, moves it by the rigid motion that best fits
// its shared edges to the neighbours already aligned.
//
// At each rank of the Riemannian staircase the coordinator runs rounds of
// agent-level block-coordinate descent (RBCD). The agent graph is coloured
// (Colors); in a round the agents of each colour class update at the same
// time (they share no edge), each lowering F over its own block with the
// others fixed: an exact joint translation step, a pass of exact single-pose
// updates (docs/design.md section 4) and trust-region Newton steps
// preconditioned by a sparse Cholesky factor of its block of Q (package
// sync's trust region on the block: sync.BlockProblem). With overlap
// (Options.Overlap, on by default) the update moves the agent's poses
// together with its halo, the other parts' poses within a few hops of its
// own, and keeps only its own: the restricted Schwarz method, whose
// overlap lets an agent see its neighbours' side of the cut (overlap.go).
// Every round starts with a Nesterov momentum step of every block,
// restarted when a round's motion ends uphill, as in DC2-PGO's accelerated RBCD.
// After each round the agents report their shares of F, of ||grad F||^2 and
// of ||2XQ||^2, which add up to the global values.
//
// The coordinator is a level optimizer of sync's one Riemannian staircase
// (sync.SolveWith): the staircase asks it for the initial estimate and,
// at each rank, for rounds until the relative gradient norm reaches
// Options.CheckTol; the coordinator then gathers the point and makes its
// translations exact (one sparse solve). Everything else is the
// staircase's, as for sync.Solve: the certificate (Cholesky of the scaled
// S plus a shift, made by the agents: see below), the proof refinements (a passed test whose gap is
// above the allowance, or a failed one at a point not converged enough,
// sends the rounds on to a hundredfold smaller gradient norm, down to
// Sync.GradTol), the inconsistent-data test, the saddle escape (the next
// level's rounds start from the escaped point, which every agent
// receives at the new rank), the rounding with its rank-d fallback (rounds
// at rank d from the rounding) and the status. So the Result and its
// report mean what they mean for sync.Solve; the report records the
// rounds of each level (levels[].rounds) and the coordinator's options.
//
// # Certificate and rounding by parts
//
// The coordinator is a sync.PartsProviders: the staircase's certificate
// and rounding are made by the agents (prove.go, round.go). Each agent
// computes its own Lambda blocks from its blocks of the point and its
// neighbours' public poses, builds its rows of the scaled, shifted S,
// factors their interior block (its poses with no edge to another part)
// and sends the Schur complement on its boundary poses
// (sync.PartCertifier); the coordinator adds the complements and the
// blocks of Q between parts and factors that boundary system
// (sync.BoundaryProof). The pivots are those of a Cholesky factorization
// of the whole matrix in the order interiors first, tested against its
// largest diagonal entry: the central proof, with the same shifts and
// bound, in another order. The rounding goes the same way: U_d from the
// agents' shares of Y Y^T, the reflection from their votes, each agent's
// rotations its own, and the translations through each agent's interior
// factor and a boundary system (rounding.RoundByParts). A test by parts
// that fails (a saddle) is made again on the gathered point, in the same
// order, for the eigenvector of the saddle escape, which stays central;
// the coordinator also still gathers the point after each level's rounds
// (its exact translations, checkpoints, the escape). Options.Central
// keeps the coordinator's own test and rounding of the gathered point.
// docs/distributed.md has the method and its figures.
//
// # Transport
//
// Coordinator and agents talk through a Bus: NATS (package
// sync/distributed/natsbus) between processes or machines, channels
// (MemBus) in one process. The NATS transport is a package of its own so
// that a program which uses another Bus does not link the NATS client. Agent k
// publishes its public poses on SUBJECT.pose.k after each change and
// serves the coordinator's commands on SUBJECT.agent.k (request-reply).
// Every message is a versioned binary record with a CRC-32 (wire.go); a
// malformed one, one from another run, at another rank, with an old
// sequence number or naming poses its sender does not own is rejected
// and logged, never applied. Commands name the sequence numbers of the
// neighbours' poses they need; an agent waits for them for a bounded time
// and otherwise answers "stale", naming what is missing, and changes
// nothing; the coordinator has those neighbours publish again and resends
// the command once. A late or lost message slows the run but cannot
// corrupt the estimate.
//
// # Faults
//
// The coordinator resends a command after each Options.Try and gives up
// on an agent after Options.Timeout. Once the agents have joined, that
// (and any other failure of the rounds) does not lose the run: Solve
// returns the estimate so far, the last point the coordinator held
// rounded, with status sync.Aborted and the error in Result.Error.
// Options.Checkpoint receives the run's state (a Checkpoint: the gathered
// point, its rank, the rounds) after each level and every
// Options.CheckpointRounds rounds, and Options.Resume starts a new
// coordinator from one, so a coordinator that dies loses at most that
// many rounds. An agent that
// restarted answers that it is not in the run; the coordinator then has it
// rejoin: its neighbours publish their poses again, and it starts from its
// own chordal estimate aligned to them, numbering its messages on from its
// last sequence number so its neighbours accept them.
//
// # Accounting
//
// Stats counts the rounds, the coordinator's messages and the agents'
// publications (whose sizes the agents report in their replies), the
// boundary of the partition, and each agent's peak resident set as it
// measures it (AgentOptions.PeakRSS); Stats.Report makes the report's
// distributed section of it.
//
// # Security
//
// The CRC catches corruption, not an intruder. With Options.Key and
// AgentOptions.Key (one secret, ReadKey) every message carries an
// HMAC-SHA256 bound to the run, the subject, the sender and a sequence
// number, in a layer around the Bus (auth.go): forged, replayed and
// foreign messages are dropped, logged and counted (Stats.Rejected), never
// applied, and restarted agents still rejoin, through a challenge that
// names their new life. NATSSecurity says how to connect to a NATS server
// that requires authentication (a credentials file, an nkey, a user and
// password, a token) and TLS with client certificates; package natsbus
// applies it (DialSecure). docs/distributed.md has the threat model and a
// secured set-up on several machines.
package distributed
