package graphs

import "fmt"

// NumberParts numbers the vertices of parts densely in order, part by part,
// as a boundary system does (each part's boundary vertices, parts in turn):
// index maps a vertex to its number and local[k] lists part k's numbers.
// A vertex named in two parts is an error, since the system would count
// its row twice.
func NumberParts(parts [][]int) (index map[int]int, local [][]int, err error) {
	index = make(map[int]int)
	local = make([][]int, 0, len(parts))
	for _, ps := range parts {
		loc := make([]int, 0, len(ps))
		for _, i := range ps {
			if _, dup := index[i]; dup {
				return nil, nil, fmt.Errorf("vertex %d in two parts", i)
			}
			index[i] = len(index)
			loc = append(loc, index[i])
		}
		local = append(local, loc)
	}
	return index, local, nil
}
