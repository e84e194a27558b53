#ifndef AVO_VERSION_H
#define AVO_VERSION_H
#define AVO_VERSION "0.1.0"
#endif
