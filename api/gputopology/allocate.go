package gputopology

import (
	"slices"
	"sort"
)

// Choosing GPUs for a multi-GPU container, in the spirit of the best-effort
// policy of NVIDIA's go-gpuallocator: every pair of GPUs gets a score from
// its link, and a set is as good as the sum of its pairs.
//
//	NVLink:     100 per link (NV12 → 1200)
//	PIX 50, PXB 40, PHB 30, NODE 20, SYS 10
//
// A pair with both NVLink and a PCIe path scores both, so NVLink always wins
// and PCIe breaks ties between equal NVLink counts.

// PairScore is the score of the link between GPUs i and j.
func PairScore(t *Topology, i, j int) int {
	l := t.Link(i, j)
	score := 100 * l.NVLinks
	switch l.PCIe {
	case PIX:
		score += 50
	case PXB:
		score += 40
	case PHB:
		score += 30
	case NODE:
		score += 20
	case SYS:
		score += 10
	}
	return score
}

// SetScore is the sum of PairScore over every pair in set: how well the
// GPUs of the set talk to each other. A set of one GPU scores 0. The
// scheduler's GPU topology plugin compares nodes with it (the best set a
// node can offer for a request).
func SetScore(t *Topology, set []int) int {
	score := 0
	for a := range set {
		for b := a + 1; b < len(set); b++ {
			score += PairScore(t, set[a], set[b])
		}
	}
	return score
}

// exhaustiveLimit bounds the exhaustive search: C(16,8) = 12870 sets, a few
// milliseconds. Larger choices are made greedily.
const exhaustiveLimit = 16

// PreferredSet picks size GPUs out of available that include every GPU in
// must, and are as well connected as possible. It answers the device
// plugin's GetPreferredAllocation. The result is sorted; nil when it cannot
// be done (too few GPUs, or must not within available).
//
// Among the candidate sets it prefers, in order:
//  1. the highest SetScore (GPUs that talk fast to each other);
//  2. the lowest score between the set and the GPUs left available, so that
//     a small request does not break up a well-connected group that a later,
//     larger request would want (a 1-GPU pod takes the GPU whose PIX
//     partner is already busy);
//  3. the lowest GPU indexes, so the answer is deterministic.
//
// With up to 16 available GPUs every candidate set is tried; beyond that,
// GPUs are added one by one, each time the one that adds most score.
func PreferredSet(t *Topology, available, must []int, size int) []int {
	avail := sortedUnique(available)
	must = sortedUnique(must)
	for _, m := range must {
		if !slices.Contains(avail, m) {
			return nil
		}
	}
	if size < len(must) || size > len(avail) || size <= 0 {
		return nil
	}
	var free []int // available and not required
	for _, a := range avail {
		if !slices.Contains(must, a) {
			free = append(free, a)
		}
	}
	if len(avail) > exhaustiveLimit {
		return greedySet(t, must, free, size)
	}
	var best []int
	bestScore, bestCut := -1, 0
	pick := make([]int, 0, size)
	var walk func(start int)
	walk = func(start int) {
		if len(pick) == size-len(must) {
			set := append(slices.Clone(must), pick...)
			sort.Ints(set)
			score, cut := SetScore(t, set), cutScore(t, set, avail)
			if score > bestScore || (score == bestScore && cut < bestCut) {
				best, bestScore, bestCut = set, score, cut
			}
			return
		}
		for k := start; k < len(free); k++ {
			pick = append(pick, free[k])
			walk(k + 1)
			pick = pick[:len(pick)-1]
		}
	}
	walk(0) // sets come in lexicographic order: the first best is the lowest
	return best
}

// cutScore sums the links between set and the other available GPUs.
func cutScore(t *Topology, set, avail []int) int {
	score := 0
	for _, a := range avail {
		if slices.Contains(set, a) {
			continue
		}
		for _, s := range set {
			score += PairScore(t, s, a)
		}
	}
	return score
}

// greedySet grows must by the GPU that adds most score, until size.
func greedySet(t *Topology, must, free []int, size int) []int {
	set := slices.Clone(must)
	for len(set) < size {
		bestK, bestGain := -1, -1
		for k, g := range free {
			gain := 0
			for _, s := range set {
				gain += PairScore(t, s, g)
			}
			if gain > bestGain {
				bestK, bestGain = k, gain
			}
		}
		set = append(set, free[bestK])
		free = slices.Delete(free, bestK, bestK+1)
	}
	sort.Ints(set)
	return set
}

func sortedUnique(xs []int) []int {
	out := slices.Clone(xs)
	sort.Ints(out)
	return slices.Compact(out)
}
