package ckpt

// A job's own /tmp and /var/tmp are tmpfs mounts roam-init makes in the
// job's mount namespace (cinit/roam-init.c, mount_job_tmp), named by their
// source. Unlike the job's other mounts they are not declared external:
// CRIU dumps a tmpfs it owns into the images itself (a tar of its content)
// and mounts and fills a new one on restore, so a migration, a lazy
// migration and a checkpoint file each carry what the job keeps there, on
// any node and for a job in a user namespace of its own too (where the
// restored mount is owned by the job's namespace, as roam-init's was
// after a move).

// JobTmpSource is the source roam-init gives the tmpfs mounts of a job's
// own /tmp and /var/tmp (roam-init.c's JOB_TMP_SOURCE).
const JobTmpSource = "roam-job-tmp"

// isJobTmp tells whether m is one of a job's own scratch mounts.
func isJobTmp(m mountEntry) bool { return m.fstype == "tmpfs" && m.source == JobTmpSource }
