"""node/master"""
