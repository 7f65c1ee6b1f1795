/*
 * Marks on the path an answer waits on, for bench/critpath.sh: a device calls
 * ub__critpath_rx() when a receive has found data and ub__critpath_tx() just before it
 * hands data to a peer (the send system call, the shm slot write). Built with
 * -DSOFTUB_CRITPATH=ON, a receive switches callgrind's collection on and a send off, so a
 * ping-pong between two devices of one process under `valgrind --tool=callgrind
 * --collect-atstart=no` counts only the work from a message's arrival to the answer's
 * departure. A receive by the device that sent last is that side's own poll while the peer
 * works (what the answer left behind), not the path: it does not start a count. The same
 * moments store to ub__critpath_mark[0] and [1], for a memory trace (bench/footprint.sh).
 * Otherwise the marks compile to nothing.
 */
#ifndef UB_DEV_CRITPATH_H
#define UB_DEV_CRITPATH_H

struct ub__dev;

#ifdef SOFTUB_CRITPATH
extern volatile unsigned char ub__critpath_mark[2];
void ub__critpath_rx(const struct ub__dev *dev);
void ub__critpath_tx(const struct ub__dev *dev);
#else
static inline void ub__critpath_rx(const struct ub__dev *dev)
{
    (void)dev;
}
static inline void ub__critpath_tx(const struct ub__dev *dev)
{
    (void)dev;
}
#endif

#endif
