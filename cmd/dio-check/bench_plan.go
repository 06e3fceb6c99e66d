package main

import (
	"github.com/dio-storage/dio/cmd/dio-check/internal/ingest"
)

// benchPlan returns the cost of every step the bench will run, in order,
// for its progress's count and time left.
func benchPlan(o *benchOptions, workloads []string, buffers []int, size, readSize int64, withRead bool) []stepCost {
	var plan []stepCost
	for range o.runs {
		for _, w := range workloads {
			for range buffers {
				for range ingest.Engines() {
					plan = append(plan, ingestCost(w, size))
				}
				if o.fio && w == ingest.SeqNoDelta {
					plan = append(plan, stepCost{bytes: size})
				}
			}
		}
	}
	if withRead {
		plan = append(plan, stepCost{bytes: readSize})
		for range o.runs * len(readRows(o.fio)) {
			plan = append(plan, stepCost{timed: o.duration})
		}
	}
	return plan
}

// ingestCost is what an ingest row of workload w over size bytes costs:
// seq writes the values twice (the ephemeral file, then the blob file)
// and reads them back once.
func ingestCost(w string, size int64) stepCost {
	if w == ingest.Seq {
		return stepCost{bytes: 2 * size}
	}
	return stepCost{bytes: size}
}
