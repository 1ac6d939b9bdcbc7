/* TCP sockets with deadlines (see socket.h). */
#include "socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

double gc_deadline_after(double seconds) { return gc_seconds() + seconds; }

int gc_ms_until(double deadline) {
    double left = deadline - gc_seconds();
    if (left <= 0) return 0;
    return left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
}

void gc_socket_prepare(int fd) {
    int flags = fcntl(fd, F_GETFL, 0);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void gc_socket_close(int fd) {
    if (fd < 0) return;
    shutdown(fd, SHUT_RDWR);
    close(fd);
}

/* host -> IPv4 address; false when it does not resolve. */
static bool resolve(const char *host, struct sockaddr_in *addr, int port) {
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_port = htons((uint16_t)port);
    if (!host || !*host || strcmp(host, "0.0.0.0") == 0) {
        addr->sin_addr.s_addr = htonl(INADDR_ANY);
        return true;
    }
    if (inet_pton(AF_INET, host, &addr->sin_addr) == 1) return true;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *found = NULL;
    if (getaddrinfo(host, NULL, &hints, &found) != 0 || !found) return false;
    addr->sin_addr = ((struct sockaddr_in *)found->ai_addr)->sin_addr;
    freeaddrinfo(found);
    return true;
}

/* A TCP socket not inherited by programs this process starts; -1 with GC_ERR_IO. */
static int new_socket(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        gc_set_error(GC_ERR_IO, "cannot create a socket: %s", strerror(errno));
        return -1;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

int gc_socket_listen(const char *host, int port, int backlog) {
    struct sockaddr_in addr;
    if (!resolve(host, &addr, port)) {
        gc_set_error(GC_ERR_FORMAT, "cannot resolve the address '%s'", host);
        return -1;
    }
    int fd = new_socket();
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, backlog) != 0) {
        int error = errno;
        close(fd);
        gc_set_error(GC_ERR_IO, "cannot listen on %s:%d: %s", host ? host : "0.0.0.0", port, strerror(error));
        return -1;
    }
    gc_socket_prepare(fd);
    return fd;
}

int gc_socket_port(int fd) {
    struct sockaddr_in addr;
    socklen_t size = sizeof addr;
    if (getsockname(fd, (struct sockaddr *)&addr, &size) != 0) return -1;
    return ntohs(addr.sin_port);
}

void gc_socket_address(int fd, char *text, size_t size) {
    struct sockaddr_in addr;
    socklen_t length = sizeof addr;
    if (getsockname(fd, (struct sockaddr *)&addr, &length) != 0 || !inet_ntop(AF_INET, &addr.sin_addr, text, size))
        snprintf(text, size, "127.0.0.1");
}

void gc_socket_peer(int fd, char *text, size_t size) {
    struct sockaddr_in addr;
    socklen_t length = sizeof addr;
    char ip[INET_ADDRSTRLEN];
    if (getpeername(fd, (struct sockaddr *)&addr, &length) != 0 || !inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof ip))
        snprintf(text, size, "?");
    else
        snprintf(text, size, "%s:%d", ip, ntohs(addr.sin_port));
}

/* Waits for `events` on fd until the deadline: 1 ready, 0 timed out. */
static int wait_for(int fd, short events, double deadline) {
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int ready = poll(&p, 1, gc_ms_until(deadline));
        if (ready >= 0 || errno != EINTR) return ready > 0 ? 1 : 0;
    }
}

int gc_socket_connect(const char *host, int port, double deadline) {
    struct sockaddr_in addr;
    if (!resolve(host, &addr, port)) {
        gc_set_error(GC_ERR_FORMAT, "cannot resolve the address '%s'", host);
        return -1;
    }
    int last_error = ETIMEDOUT;
    do {
        int fd = new_socket();
        if (fd < 0) return -1;
        gc_socket_prepare(fd);
        int done = connect(fd, (struct sockaddr *)&addr, sizeof addr);
        if (done != 0 && errno == EINPROGRESS && wait_for(fd, POLLOUT, deadline)) {
            socklen_t size = sizeof last_error;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &last_error, &size);
            done = last_error == 0 ? 0 : -1;
        } else if (done != 0) {
            last_error = errno == EINPROGRESS ? ETIMEDOUT : errno;
        }
        if (done == 0) return fd;
        close(fd);
        /* refused: the listener is not up yet; anything else may be a network still coming up */
        struct timespec pause = {0, 50 * 1000 * 1000};
        if (gc_ms_until(deadline) > 50) nanosleep(&pause, NULL);
    } while (gc_ms_until(deadline) > 0);
    gc_set_error(GC_ERR_PEER, "cannot connect to %s:%d: %s (gave up at the timeout)", host, port, strerror(last_error));
    return -1;
}

int gc_socket_accept(int listen_fd, double deadline) {
    for (;;) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd >= 0) {
            fcntl(fd, F_SETFD, FD_CLOEXEC);
            gc_socket_prepare(fd);
            return fd;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
            gc_set_error(GC_ERR_PEER, "accept failed: %s", strerror(errno));
            return -1;
        }
        if (!wait_for(listen_fd, POLLIN, deadline)) {
            gc_set_error(GC_ERR_PEER, "no connection arrived before the timeout");
            return -1;
        }
    }
}

long gc_socket_send_some(int fd, const void *data, size_t size, bool *closed) {
    *closed = false;
    ssize_t sent = send(fd, data, size, MSG_NOSIGNAL);
    if (sent >= 0) return sent;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    *closed = true;
    return -1;
}

long gc_socket_recv_some(int fd, void *data, size_t size, bool *closed) {
    *closed = false;
    ssize_t received = recv(fd, data, size, 0);
    if (received > 0) return received;
    if (received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (received == 0) errno = 0; /* an orderly end of file */
    *closed = true;
    return -1;
}

/* The reason a transfer stopped, for messages. */
static const char *broken_reason(void) {
    return errno == 0 ? "the peer closed the connection" : strerror(errno);
}

gc_status gc_socket_send_all(int fd, const void *data, size_t size, double deadline, const char *what) {
    const char *bytes = data;
    while (size) {
        bool closed;
        long sent = gc_socket_send_some(fd, bytes, size, &closed);
        if (closed) {
            gc_set_error(GC_ERR_PEER, "%s: %s", what, broken_reason());
            return GC_ERR_PEER;
        }
        if (sent == 0 && !wait_for(fd, POLLOUT, deadline)) {
            gc_set_error(GC_ERR_PEER, "%s: timed out", what);
            return GC_ERR_PEER;
        }
        bytes += sent;
        size -= (size_t)sent;
    }
    return GC_OK;
}

gc_status gc_socket_recv_all(int fd, void *data, size_t size, double deadline, const char *what) {
    char *bytes = data;
    while (size) {
        bool closed;
        long received = gc_socket_recv_some(fd, bytes, size, &closed);
        if (closed) {
            gc_set_error(GC_ERR_PEER, "%s: %s", what, broken_reason());
            return GC_ERR_PEER;
        }
        if (received == 0 && !wait_for(fd, POLLIN, deadline)) {
            gc_set_error(GC_ERR_PEER, "%s: timed out", what);
            return GC_ERR_PEER;
        }
        bytes += received;
        size -= (size_t)received;
    }
    return GC_OK;
}
