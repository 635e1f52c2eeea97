// Package graphs holds the small graph algorithms several packages of
// bcmsync need on their own vertex numbering: union-find (connected
// components, a spanning forest, anchors of translation systems) and a
// greedy colouring (block updates that can run at the same time).
package graphs
