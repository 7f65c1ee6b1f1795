/* softub error codes: one list, negative ints, described by ub_strerror(). */
#ifndef SOFTUB_ERRORS_H
#define SOFTUB_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * X(name, value, description). Values are stable ABI: append, never renumber.
 * Every function that can fail returns 0 (or a count) on success and one of
 * these on failure.
 */
#define UB_ERROR_LIST(X)                                            \
    X(UB_OK, 0, "success")                                          \
    X(UB_EINVAL, -1, "invalid argument")                            \
    X(UB_ENOMEM, -2, "out of memory")                               \
    X(UB_ENOBUFS, -3, "no buffer space available")                  \
    X(UB_EAGAIN, -4, "resource temporarily unavailable, try again") \
    X(UB_ETRUNC, -5, "packet or buffer truncated")                  \
    X(UB_EBADMSG, -6, "malformed message")                          \
    X(UB_EOVERFLOW, -7, "value does not fit its field")             \
    X(UB_ENOTSUP, -8, "operation not supported")                    \
    X(UB_ENOENT, -9, "no such object")                              \
    X(UB_EEXIST, -10, "object already exists")                      \
    X(UB_EBUSY, -11, "object is busy")                              \
    X(UB_EFULL, -12, "queue is full")                               \
    X(UB_EEMPTY, -13, "queue is empty")                             \
    X(UB_ERANGE, -14, "value out of range")                         \
    X(UB_EIO, -15, "device input/output error")                     \
    X(UB_ETIMEDOUT, -16, "operation timed out")                     \
    X(UB_EUNREACH, -17, "peer unreachable")                         \
    X(UB_ESTALE, -18, "stale incarnation or epoch")                 \
    X(UB_EACCESS, -19, "access denied")                             \
    X(UB_ETOKEN, -20, "invalid token")                              \
    X(UB_ELENGTH, -21, "length error")                              \
    X(UB_ERNR, -22, "receiver not ready")                           \
    X(UB_EFLUSHED, -23, "request flushed")                          \
    X(UB_EAUTH, -24, "authentication failed")                       \
    X(UB_EREPLAY, -25, "replayed packet")                           \
    X(UB_EPROTO, -26, "protocol error")                             \
    X(UB_ECLOSED, -27, "object closed")

enum ub_error {
#define UB__ERR_ENUM(name, value, desc) name = (value),
    UB_ERROR_LIST(UB__ERR_ENUM)
#undef UB__ERR_ENUM
};

/* A static description of err; never NULL ("unknown error" for foreign codes). */
const char *ub_strerror(int err);

/* The symbolic name of err ("UB_EINVAL"), or NULL for an unknown code. */
const char *ub_errname(int err);

#ifdef __cplusplus
}
#endif
#endif
