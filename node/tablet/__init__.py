"""node/tablet"""
