//! edgecache policy language (work in progress).
