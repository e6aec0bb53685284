// Command gowork is a fixed amount of CPU work in Go for make bench (bench/run-bench): every round recurses 64
// calls deep and spins at the bottom, so each sample's stack is deep and every frame keeps a frame pointer — the
// most the kernel's frame-pointer walk (hostprof's --no-fp-chain) costs a sampled thread.
// Usage: gowork ROUNDS; prints "cpu SECONDS s", its own CPU time.
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
)

const depth = 64

var sink uint64

//go:noinline
func walk(d int, x uint64) uint64 {
	if d == 0 {
		for i := 0; i < 20000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
			x ^= x >> 29
		}
		return x
	}
	return walk(d-1, x+uint64(d)) ^ uint64(d)
}

func main() {
	rounds := 100000
	if len(os.Args) > 1 {
		if n, err := strconv.Atoi(os.Args[1]); err == nil && n > 0 {
			rounds = n
		}
	}
	for r := 0; r < rounds; r++ {
		sink ^= walk(depth, uint64(r))
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fmt.Fprintln(os.Stderr, "gowork:", err)
		os.Exit(1)
	}
	cpu := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
	fmt.Printf("sink %d\ncpu %.3f s\n", sink%10, cpu)
}
