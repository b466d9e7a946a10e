# Off-CPU target: a Python function blocked in time.sleep, Lock.acquire,
# socket.recv, and threads waiting for the GIL while others run Python.
import socket
import threading
import time


def sleeper():
    for _ in range(10):
        time.sleep(0.02)


# The Python reader finds a new thread at its next scan of the thread
# list (at most every 20 ms): let it settle before the block under test.
def settle():
    time.sleep(0.05)


def waiter(lock):
    settle()
    lock.acquire()


def receiver(sock):
    settle()
    sock.recv(16)


def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x


def gil_worker(stop):
    while not stop.is_set():
        spin(20000)


def main():
    sleeper()
    lock = threading.Lock()
    lock.acquire()
    t = threading.Thread(target=waiter, args=(lock,))
    t.start()
    time.sleep(0.5)
    lock.release()
    t.join()
    a, b = socket.socketpair()
    t = threading.Thread(target=receiver, args=(a,))
    t.start()
    time.sleep(0.5)
    b.send(b"x")
    t.join()
    stop = threading.Event()
    workers = [threading.Thread(target=gil_worker, args=(stop,)) for _ in range(3)]
    for w in workers:
        w.start()
    time.sleep(0.5)
    stop.set()
    for w in workers:
        w.join()


main()
