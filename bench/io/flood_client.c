// flood_client PORT SECONDS: writes 64 KiB blocks to 127.0.0.1:PORT as fast as the socket takes them and reads back on a second thread (bench/io/coop_fairness.sh)
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
static int fd; static volatile int stop;
static void* rd(void* a){ char b[65536]; while(!stop){ if(read(fd,b,sizeof b)<=0) break;} return 0; }
int main(int c, char** v){ int port=atoi(v[1]); int secs=atoi(v[2]);
 struct sockaddr_in s={.sin_family=AF_INET,.sin_port=htons(port)}; inet_pton(AF_INET,"127.0.0.1",&s.sin_addr);
 fd=socket(AF_INET,SOCK_STREAM,0); if(connect(fd,(void*)&s,sizeof s)){perror("connect");return 1;}
 pthread_t t; pthread_create(&t,0,rd,0); char b[65536]; memset(b,0,sizeof b);
 time_t end=time(0)+secs; while(time(0)<end){ if(write(fd,b,sizeof b)<=0) break; }
 stop=1; shutdown(fd,SHUT_WR); pthread_join(t,0); return 0; }
