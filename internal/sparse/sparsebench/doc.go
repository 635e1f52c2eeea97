// Package sparsebench holds the benchmarks of package sparse on the real
// pose graphs of the benchmark suite and on a synthetic 100,000-pose 3-D
// grid. It is a separate package so that the unit tests of sparse do not
// depend on the g2o reader.
//
//	go test ./internal/sparse/sparsebench -run XXX -bench Dataset -benchtime 3x
//	go test ./internal/sparse/sparsebench -run XXX -bench Grid100k -benchtime 1x
//	go test ./internal/sparse/sparsebench -run XXX -bench Eig -benchtime 1x
//	go test ./internal/sparse/sparsebench -run XXX -bench 'Order$' -benchtime 1x
//	go test ./internal/sparse/sparsebench -run XXX -bench OrderFactor -benchtime 4x
//
// Each dataset benchmark reports the nonzeros of the factor (nnzL) and
// splits the work into ordering + symbolic analysis, numeric factorization,
// one solve and the product X*Q at rank r = 5 on one and two threads.
// BenchmarkEig times LargestEig, preconditioned SmallestEig and PCG on real
// Q matrices. BenchmarkOrder compares BlockAMD, NestedDissection and
// BlockOrder (ordering time, nonzeros and flops of the factor) on the
// suite and on 3-D grids of 10^4, 10^5 and (with -bcmsync.large-order)
// 10^6 poses; BenchmarkOrderFactor times the numeric factorization under
// each ordering.
package sparsebench
