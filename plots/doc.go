// Package plots draws the figures of a bcmsync run with gonum/plot:
// trajectories of a pose graph, the convergence history of the Riemannian
// staircase, and the time spent per stage.
//
// The inputs are plain data (poses, slices of numbers), so the package
// depends only on posegraph and can draw results from any solver:
//
//   - Trajectories overlays estimates of a graph's poses (for example the
//     initial guess and the optimized solution) with equal scales on both
//     axes, optionally with the loop-closure edges. A 2-D graph is drawn from
//     above; a 3-D graph as a 2 x 2 grid of orthographic views, top (x-y),
//     front (x-z), side (y-z) and oblique, whose world axes are drawn in its
//     corner. The oblique projection basis is built with the cross and dot
//     products of github.com/golang/geo/r3.
//   - Convergence draws F - F_final and the Riemannian gradient norm against
//     iteration and time on log scales, one curve per staircase level, with
//     a marker where each level's certificate check passed or failed.
//     Values at or below F_final are drawn on a floor rather than dropped.
//   - StageTimes draws a bar per stage with its time and share.
//   - TrajectoryError draws an estimate aligned to a reference, each step
//     coloured by its error on a colour bar, above the error against pose
//     index with its RMSE: the figure of `bcmsync evaluate --plot`.
//   - WriteHTML writes an interactive viewer: one self-contained HTML page
//     (style, script and data inlined, no network) that draws the graph on
//     a <canvas>, 2-D with pan and zoom or 3-D with an orbit camera, shows
//     the estimates one at a time or overlaid, colours edges and poses by
//     their term of the objective (EdgeCosts) on a logarithmic scale, and,
//     given a Run, puts the certificate in its header and the convergence
//     history under the view; given Ellipses (position covariances), it
//     draws them around the last estimate behind a toggle. The page's
//     script is plots/viewer/viewer.js,
//     embedded at build time; docs/view.md describes the page.
//
// Every figure has a fixed size (16 x 12 cm, 16 x 16 cm for 3-D
// trajectories, 16 x 18 cm for TrajectoryError) and one legend in a strip
// under its title, outside the data. The output format follows the file extension: .png (at DPI dots per inch,
// 705 pixels across, the width a README shows), .svg or .pdf; anything
// else is an error. Colours come from the Okabe-Ito palette, which stays
// distinguishable for colour-blind readers.
package plots
