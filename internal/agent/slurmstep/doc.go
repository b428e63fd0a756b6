// Package slurmstep is a node's part in serving Slurm jobs (docs/slurm.md):
// the groups of a job's extern step that its processes join on this node
// (Groups, Roots), the question to Slurm's controller that checks a run's
// claim to a job (Ask), and the word to the extern step of each process
// that starts or is restored here (Steps). cmd/roamd wires them into the
// job launcher, the checkpointer and the agent when slurm.enabled is set.
//
// It decides nothing about placement (sched.Within does) and keeps no
// state of a job but the count of its processes running here.
package slurmstep
