/*
 * Marks on the path an answer waits on, for bench/critpath.sh: a device calls
 * ub__critpath_rx() when a receive has found the peer's data and ub__critpath_tx() just
 * before it hands data to the peer (the send system call, the shm slot write). Built with
 * -DSOFTUB_CRITPATH=ON, the first switches callgrind's collection on and the second off, so
 * a ping-pong under `valgrind --tool=callgrind --collect-atstart=no` counts only the work
 * from a message's arrival to the answer's departure. Otherwise they compile to nothing.
 */
#ifndef UB_DEV_CRITPATH_H
#define UB_DEV_CRITPATH_H

#ifdef SOFTUB_CRITPATH
void ub__critpath_rx(void);
void ub__critpath_tx(void);
#else
static inline void ub__critpath_rx(void)
{
}
static inline void ub__critpath_tx(void)
{
}
#endif

#endif
